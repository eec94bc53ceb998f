"""The device kit's comparisons on small fixtures: what a GPU run will rely on, tested where
there is none (check.sh runs these in every mode, the rehearsal included)."""
import unittest
from collections import Counter
from pathlib import Path

import compare

TRACE = Path(__file__).parent / "fixtures" / "profiler_trace.json"
CONV = ("cudnn::cnn::conv2d_grouped_direct_kernel<float, float, float, float, float, true, false, "
        "0, 0, 0>(cudnn::cnn::GroupedDirectFpropParams, float const*, float const*, float*, float, "
        "float, float const*, float const*, float const*, cudnnActivationStruct)")
ADD = ("at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "std::array<char*, 3ul>>(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)")


class KernelCounts(unittest.TestCase):
    def test_trace_counts_kernels_only(self):
        counts = compare.trace_kernel_counts(TRACE)
        self.assertEqual(sum(counts.values()), 4)  # not the runtime call, not the copy
        self.assertEqual(counts[compare.normalize_kernel("triton_poi_fused_add_mul_0")], 2)

    def test_equal_counts_under_either_spelling(self):
        # sonde's demangler without the return type and with '>>'; Kineto's with both.
        sonde = {CONV: 1, "triton_poi_fused_add_mul_0": 2, ADD: 1}
        self.assertEqual(compare.count_differences(sonde, compare.trace_kernel_counts(TRACE)), [])

    def test_a_missing_or_extra_launch_is_reported(self):
        sonde = {CONV: 1, "triton_poi_fused_add_mul_0": 1, ADD: 1, "extra()": 3}
        diff = compare.count_differences(sonde, compare.trace_kernel_counts(TRACE))
        self.assertEqual(diff, [("extra()", 3, 0), ("triton_poi_fused_add_mul_0", 1, 2)])

    def test_empty_sides_differ(self):
        self.assertEqual(compare.count_differences({}, Counter({"k()": 1})), [("k()", 0, 1)])


class OperatorCounts(unittest.TestCase):
    NODE = "autograd::engine::evaluate_function: ConvolutionBackward0"

    def test_trace_counts_operators_only(self):
        counts = compare.trace_op_counts(TRACE)
        self.assertEqual(counts, Counter({"aten::conv2d": 1, "aten::convolution": 1,
                                          self.NODE: 2}))

    def test_top_level_counts_equal_pass(self):
        # aten::convolution is called by aten::conv2d: sonde counts it in conv2d's time.
        sonde = {"aten::conv2d": 1, self.NODE: 2}
        self.assertEqual(compare.operator_count_failures(
            sonde, compare.trace_op_counts(TRACE), ["aten::conv2d"]), [])

    def test_a_missed_call_a_missed_node_or_an_extra_count_fails(self):
        theirs = compare.trace_op_counts(TRACE)
        bad = compare.operator_count_failures(
            {"aten::conv2d": 0, self.NODE: 1, "aten::convolution": 2}, theirs, ["aten::conv2d"])
        self.assertEqual(bad, ["aten::conv2d: sonde 0, torch.profiler 1",
                               f"{self.NODE}: sonde 1, torch.profiler 2",
                               "aten::convolution: sonde 2 > torch.profiler 1"])

    def test_one_call_torch_profiler_missed_is_no_failure_a_doubled_count_is(self):
        self.assertEqual(compare.operator_count_failures({"aten::add_": 60}, {"aten::add_": 59},
                                                         []), [])
        self.assertEqual(compare.operator_count_failures({"aten::add_": 120}, {"aten::add_": 60},
                                                         []), ["aten::add_: sonde 120 > "
                                                               "torch.profiler 60"])


class Attribution(unittest.TestCase):
    FRAMES = ["cnn_step", "graph_step"]

    def test_kernels_beneath_their_frames_pass(self):
        rows = [("k", "kit.py:10(<module>);kit.py:50(run_steps);kit.py:20(cnn_step);"
                      "cudnnBackendExecute;cudaLaunchKernel"),
                ("g", "kit.py:50(run_steps);kit.py:30(graph_step);cudaGraphLaunch"),
                ("init", "kit.py:10(<module>);cudaLaunchKernel")]  # outside the steps: not judged
        self.assertEqual(compare.misattributed(rows, "run_steps", self.FRAMES), [])

    def test_a_kernel_straight_under_the_loop_or_without_a_path_fails(self):
        rows = [("k", "kit.py:50(run_steps);cudaLaunchKernel"), ("n", None),
                ("x", "kit.py:50(run_steps);kit.py:20(cnn_step_helper);cudaLaunchKernel")]
        self.assertEqual(len(compare.misattributed(rows, "run_steps", self.FRAMES)), 3)


class Times(unittest.TestCase):
    def test_within_tolerance(self):
        self.assertEqual(compare.event_time_mismatches([100_000, 101_000], [0.1002, 0.1030]), [])

    def test_outside_tolerance_and_count_mismatch(self):
        self.assertEqual(compare.event_time_mismatches([100_000], [0.2]), [(0, 100.0, 200.0)])
        self.assertEqual(compare.event_time_mismatches([1, 2], [0.1]), [(None, 2, 1)])

    def test_paired_ratio_is_the_median(self):
        self.assertEqual(compare.paired_ratio([1.0, 2.0, 1.0], [1.1, 2.0, 3.0]), 1.1)


class Breakdown(unittest.TestCase):
    @staticmethod
    def breakdown(**gpu):
        """A `breakdown` member as sonde metrics writes it: host time_s, device gpu_s."""
        device = {"t_io": 0.0, "t_h2d": 0.01, "t_f": 0.2, "t_b": 0.3, "t_u": 0.02, "t_comm": 0.0,
                  "other": 0.01, "outside": 0.05, "unmeasured": 0.0}
        device.update(gpu)
        return {"found": True, "gpu": True,
                "phases": [{"phase": k, "time_s": 0.005, "gpu_s": v} for k, v in device.items()]}

    def test_a_good_run_passes(self):
        self.assertEqual(compare.breakdown_failures(self.breakdown(), 0.59), [])

    def test_rows_must_hold_all_device_time_once(self):
        bad = compare.breakdown_failures(self.breakdown(), 0.6)
        self.assertEqual(len(bad), 1)
        self.assertIn("not the file's", bad[0])

    def test_backward_missing_or_off_ratio(self):
        # What an autograd thread left out of the loop looks like: t_b on the device ~ 0.
        bad = compare.breakdown_failures(self.breakdown(t_b=0.0, outside=0.35), 0.59)
        self.assertEqual(bad, ["t_b: no device time",
                               "device t_b / t_f = 0.00, not within 1.3-1.8"])

    def test_no_loop_or_no_device_time(self):
        self.assertIn("no training loop", compare.breakdown_failures(
            {"found": False, "reason": "x"}, 0)[0])
        self.assertIn("gpu false", compare.breakdown_failures({"found": True, "gpu": False}, 0)[0])


if __name__ == "__main__":
    unittest.main()
