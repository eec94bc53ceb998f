"""Per-kernel GPU metrics (SONDE_GPU_METRICS) without a GPU: cupti_app launches kernels whose
metric values the stub libcupti's range profiler reports (tests/stubs/cupti). Each launch's
values must land on that launch's activity row, under its call path; TAU's derived metrics and
ranking must follow from them; and whatever the profiler refuses (an unknown metric, counters
restricted to administrators) is said once while kernels and copies are still recorded."""
import json

import pytest

from conftest import CLI, query, routine_calls, run
from test_cupti import STUBS, gpu_rows, notes, run_app

pytestmark = pytest.mark.skipif(
    not STUBS, reason="CUPTI headers absent at configure time: no CUPTI backend, no stub")

SOL = ["sm__throughput.avg.pct_of_peak_sustained_elapsed",
       "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]
METRICS = ",".join(["tau"] + SOL)


DURATION = "gpu__time_duration.sum"  # added by sonde to every metrics configuration


def metrics_of(db, kernel, duration=False):
    """Each launch of `kernel` as {metric: value}, in launch order (replayed kernels have no
    timestamps: the order their records were written), without the duration sonde adds unless
    `duration`."""
    rows = query(db, "SELECT g.activity_id, m.metric, m.value FROM gpu_activity g "
                     "JOIN gpu_metrics m USING (activity_id) WHERE g.name = ? "
                     "ORDER BY g.activity_id, m.metric", (kernel,))
    launches = {}
    for activity, metric, value in rows:
        if duration or metric != DURATION:
            launches.setdefault(activity, {})[metric] = value
    return list(launches.values())


def info(db, key):
    rows = query(db, "SELECT value FROM run_info WHERE key = ?", (key,))
    return rows[0][0] if rows else None


def test_each_launch_gets_its_own_metrics(db):
    run_app(db, "metrics", SONDE_GPU_METRICS=METRICS)
    conv = {"smsp__warps_launched.sum": 1000, "smsp__inst_executed.sum": 50000,
            "smsp__inst_executed_op_global_ld.sum": 5000, SOL[0]: 40, SOL[1]: 70}
    relu = {"smsp__warps_launched.sum": 200, "smsp__inst_executed.sum": 2000,
            "smsp__inst_executed_op_global_ld.sum": 1000, SOL[0]: 10, SOL[1]: 90}
    assert metrics_of(db, "conv(float*)") == [conv] * 3
    assert metrics_of(db, "relu(float*)") == [relu] * 3
    # CUPTI delivers a replayed kernel's record without timestamps: the rows have none, and
    # the range profiler's duration is the launch's time in every view.
    assert query(db, "SELECT COUNT(*) FROM gpu_activity WHERE kind = 'kernel' AND "
                     "start_ns IS NULL AND end_ns IS NULL") == [(6,)]
    assert [m[DURATION] for m in metrics_of(db, "conv(float*)", True)] == [3e6] * 3
    assert query(db, "SELECT kernel, calls, time_s, avg_s FROM gpu_kernel_totals "
                     "ORDER BY kernel") == [("conv(float*)", 3, 0.009, 0.003),
                                            ("relu(float*)", 3, 0.003, 0.001)]
    assert info(db, "gpu.untimed") == "6"
    assert not notes(db, "gpu-drops")  # nothing lost, nothing "unfinished"
    # The launches are measured as usual, each once.
    assert routine_calls(db, "cudaLaunchKernel") == 7
    assert info(db, "gpu.metrics") == ",".join(
        ["smsp__warps_launched.sum", "smsp__inst_executed.sum",
         "smsp__inst_executed_op_global_ld.sum"] + SOL + [DURATION])
    assert info(db, "gpu.metric_launches") == "6"
    assert info(db, "gpu.metric_lost") == "1"
    assert info(db, "gpu.metric_passes") == "3"  # the stub's: (5 metrics + 1) / 2
    # One note, about timing; nothing failed.
    assert [t for (t,) in query(db, "SELECT topic FROM notes")] == ["gpu-metrics-timing"]


def test_views_give_tau_derived_metrics_per_call_path(db):
    run_app(db, "metrics", SONDE_GPU_METRICS=METRICS)
    rows = query(db, "SELECT kernel, call_path, calls, warps_per_inst, gld_per_inst "
                     "FROM gpu_kernels ORDER BY kernel, call_path")
    assert rows == [
        ("conv(float*)", "conv;cudaLaunchKernel", 2, 0.02, 0.1),
        ("conv(float*)", "failed;cudaLaunchKernel", 1, 0.02, 0.1),
        ("relu(float*)", "relu;cudaLaunchKernel", 3, 0.1, 0.5),
    ]
    assert query(db, "SELECT launches, total, mean FROM gpu_kernel_metrics "
                     "WHERE kernel = 'relu(float*)' AND metric = ?", (SOL[1],)) == [(3, 270.0, 90.0)]


def test_candidates_rank_kernels_by_tau_metric_times_time(db):
    run_app(db, "metrics", SONDE_GPU_METRICS=METRICS)
    r = run([CLI, "candidates", db, "--format", "json"])
    assert r.returncode == 0, r.stderr
    kernels = [c for c in json.loads(r.stdout)["candidates"] if c["rule"] == "gpu-kernel"]
    by_location = {c["location"]: c["evidence"] for c in kernels}
    assert set(by_location) == {"conv(float*)", "relu(float*)"}
    conv, relu = by_location["conv(float*)"], by_location["relu(float*)"]
    assert conv["warps_per_inst"] == pytest.approx(0.02)
    assert relu["gld_per_inst"] == pytest.approx(0.5)
    assert conv["warps_per_inst_x_time_s"] == pytest.approx(0.02 * 0.009)
    assert relu["warps_per_inst_x_time_s"] == pytest.approx(0.1 * 0.003)
    assert conv["sm_pct_peak"] == pytest.approx(40) and conv["memory_pct_peak"] == pytest.approx(70)
    # Gains from the nearer throughput peak: conv 0.5 x 9 ms x 0.3, relu 0.5 x 3 ms x 0.1.
    gains = {c["location"]: c["est_gain_s"] for c in kernels}
    assert gains == {"conv(float*)": pytest.approx(0.00135), "relu(float*)": pytest.approx(0.00015)}


@pytest.mark.parametrize("mode", ["metrics_threads", "metrics_threads_swapped"])
def test_launches_on_one_context_at_once_are_counted_not_guessed(db, mode):
    # Two threads launch on one context: the first launch's range window holds both kernels.
    # Auto ranges are named "0", "1" (by the order the kernels ran, not after them), so which
    # range is whose cannot be known: the second launch is not profiled (skipped, busy) and the
    # first one's decode, holding two ranges, is counted as ambiguous instead of guessed. With
    # the kernels run in the opposite order of the entries (swapped), a guess by entry order
    # gives b() the values of a().
    run_app(db, mode, SONDE_GPU_METRICS="tau")
    assert metrics_of(db, "a()") == []
    assert metrics_of(db, "b()") == []
    paths = dict(query(db, "SELECT kernel, call_path FROM gpu_kernels"))
    assert paths == {"a()": "main_launch;cudaLaunchKernel", "b()": "cudaLaunchKernel"}
    assert info(db, "gpu.metric_skipped_busy") == "1"
    assert info(db, "gpu.metric_ambiguous") == "1"
    assert info(db, "gpu.metric_lost") == "1"
    assert info(db, "gpu.metric_launches") == "0"


def test_no_launch_is_profiled_during_a_stream_capture(db):
    # The range profiler synchronises the context, which invalidates a capture under way
    # (CUDA graphs in PyTorch, torch.compile): launches between BeginCapture and EndCapture are
    # not profiled; the next launch after it is.
    r = run_app(db, "metrics_capture", SONDE_GPU_METRICS="tau")
    assert "capture_invalidated=0" in r.stdout
    assert info(db, "gpu.metric_skipped_capture") == "1"
    assert metrics_of(db, "after()") == [{"smsp__warps_launched.sum": 2,
                                         "smsp__inst_executed.sum": 20,
                                         "smsp__inst_executed_op_global_ld.sum": 2}]
    assert routine_calls(db, "cudaStreamBeginCapture") == 1


def test_kernels_that_wait_for_others_are_not_replayed(db):
    # An NCCL kernel spins until its peers arrive and a cooperative grid waits for all its
    # blocks: kernel replay would run one alone and hang. Skipped and counted; a plain launch
    # right after is measured.
    run_app(db, "metrics_waits", SONDE_GPU_METRICS="tau")
    assert info(db, "gpu.metric_skipped_waiting") == "3"
    for kernel in ["ncclDevKernel_AllReduce_Sum_f32_RING_LL()", "grid()", "gridex()"]:
        assert metrics_of(db, kernel) == [], kernel
    assert metrics_of(db, "plain()") == [{"smsp__warps_launched.sum": 3,
                                         "smsp__inst_executed.sum": 30,
                                         "smsp__inst_executed_op_global_ld.sum": 3}]
    assert info(db, "gpu.metric_lost") == "0"


def test_range_profiler_is_set_up_when_the_context_is_created(db):
    # Enable, counter data image and configuration happen in the context-created callback,
    # not inside the first launch's callback.
    r = run_app(db, "context", SONDE_GPU_METRICS="tau")
    assert "ready_before_launch=1" in r.stdout


def test_unknown_metric_is_said_once_and_the_others_recorded(db):
    r = run_app(db, "metrics", SONDE_GPU_METRICS="tau,no_such__metric.sum")
    (note,) = [m for m in notes(db, "gpu-metrics") if "no_such" in m]
    assert "CUPTI_ERROR_INVALID_METRIC_NAME" in note and "GH100" in note
    assert r.stderr.count("no_such__metric.sum") == 1
    assert len(metrics_of(db, "relu(float*)")) == 3
    assert query(db, "SELECT COUNT(DISTINCT metric) FROM gpu_metrics") == [(4,)]  # + duration


def test_no_known_metric_records_kernels_without_metrics(db):
    run_app(db, "metrics", SONDE_GPU_METRICS="no_such__metric.sum")
    assert any("none of the GPU metrics" in m for m in notes(db, "gpu-metrics"))
    assert query(db, "SELECT COUNT(*) FROM gpu_metrics") == [(0,)]
    assert len(gpu_rows(db, "kernel")) == 6


def test_counters_restricted_to_administrators(db):
    # What CUPTI answers where the driver keeps performance counters for administrators
    # (ERR_NVGPUCTRPERM): one note that says how to allow them; kernels, copies and their call
    # paths are recorded as without metrics.
    r = run_app(db, "metrics", SONDE_GPU_METRICS="tau", CUPTI_STUB_NO_PROFILER="1")
    (note,) = [m for m in notes(db, "gpu-metrics") if "failed" in m]
    assert "cuptiRangeProfilerEnable" in note and "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES" in note
    assert "NVreg_RestrictProfilingToAdminUsers" in note
    assert r.stderr.count("INSUFFICIENT_PRIVILEGES") == 1
    assert query(db, "SELECT COUNT(*) FROM gpu_metrics") == [(0,)]
    assert len(gpu_rows(db, "kernel")) == 6
    assert query(db, "SELECT call_path, calls FROM gpu_kernels WHERE kernel = 'relu(float*)'") == [
        ("relu;cudaLaunchKernel", 3)]


def test_without_the_variable_no_metrics_and_no_timing_note(db):
    run_app(db, "metrics")
    assert query(db, "SELECT COUNT(*) FROM gpu_metrics") == [(0,)]
    assert notes(db) == []
    assert info(db, "gpu.metrics") is None
    assert query(db, "SELECT warps_per_inst FROM gpu_kernels WHERE kernel = 'relu(float*)'") == [
        (None,)]


def test_metrics_kernels_section_is_taus_table(db):
    run_app(db, "metrics", SONDE_GPU_METRICS=METRICS)
    r = run([CLI, "metrics", db, "--section", "kernels", "--format", "json"])
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["kernels"]
    # Ranked by warps/inst x time: relu 0.1 x 3 ms = 3e-4 before conv 0.02 x 9 ms = 1.8e-4,
    # although conv runs three times as long.
    assert [row["kernel"] for row in rows] == ["relu(float*)", "conv(float*)"]
    relu, conv = rows
    assert relu["launches"] == 3 and relu["metric_launches"] == 3
    assert relu["inst_per_gld"] == pytest.approx(2.0)
    assert conv["inst_per_gld"] == pytest.approx(10.0)
    assert relu["warps_per_inst_x_time_s"] == pytest.approx(3e-4)
    assert conv["gld_per_inst_x_time_s"] == pytest.approx(0.1 * 0.009)
    assert relu["memory_pct_peak"] == pytest.approx(90)
    text = run([CLI, "metrics", db, "--section", "kernels"]).stdout
    assert "ranked as TAU ranks tuning candidates" in text and "warps/inst" in text


def test_kernels_section_without_metrics_says_how_to_get_them(db):
    run_app(db, "metrics")
    text = run([CLI, "metrics", db, "--section", "kernels"]).stdout
    assert "SONDE_GPU_METRICS=tau" in text
    assert text.index("conv(float*)") < text.index("relu(float*)")  # by time: 9 ms, 3 ms


def test_a_metric_that_evaluates_to_nan_is_left_out_and_the_flush_goes_on(db):
    # CUPTI gives NaN for a ratio over nothing; SQLite would store it as NULL and refuse the
    # row (value NOT NULL), failing every flush after it. Left out and counted instead.
    run_app(db, "metrics_nan", SONDE_GPU_METRICS=METRICS)
    assert metrics_of(db, "empty()") == [{"smsp__warps_launched.sum": 10,
                                         "smsp__inst_executed.sum": 100,
                                         "smsp__inst_executed_op_global_ld.sum": 0}]
    assert info(db, "gpu.metric_not_finite") == "2"
    assert query(db, "SELECT end_reason FROM processes") == [("exit",)]
    assert query(db, "SELECT call_path FROM gpu_kernels") == [("empty;cudaLaunchKernel",)]


def test_a_record_flushed_before_its_launch_exits_waits_for_its_metrics(db):
    run_app(db, "metrics_early", SONDE_GPU_METRICS="tau")
    assert metrics_of(db, "early()") == [{"smsp__warps_launched.sum": 40,
                                         "smsp__inst_executed.sum": 400,
                                         "smsp__inst_executed_op_global_ld.sum": 4}]
    assert query(db, "SELECT call_path, calls FROM gpu_kernels") == [("early;cudaLaunchKernel", 1)]
    assert info(db, "gpu.metric_lost") == "0"


def test_a_context_made_again_with_the_same_handle_is_measured_afresh(db):
    # cudaDeviceReset destroys the context, and the next one may get the same handle: sonde
    # stops and disables the old range profiler when it hears of the destruction, so the new
    # context gets one of its own instead of a dead object.
    r = run_app(db, "metrics_reset", SONDE_GPU_METRICS="tau")
    assert metrics_of(db, "before()") == [{"smsp__warps_launched.sum": 1,
                                          "smsp__inst_executed.sum": 10,
                                          "smsp__inst_executed_op_global_ld.sum": 1}]
    assert metrics_of(db, "after()") == [{"smsp__warps_launched.sum": 2,
                                         "smsp__inst_executed.sum": 20,
                                         "smsp__inst_executed_op_global_ld.sum": 2}]
    assert "outside a range" not in r.stdout
    assert [m for m in notes(db, "gpu-metrics") if "failed" in m] == []
