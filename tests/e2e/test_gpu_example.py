"""The GPU reference workload (examples/cnn_cudnn, cnn_train) under sonde without a GPU: run
against the stub CUDA libraries (tests/stubs/gpu), whose calls do nothing, the profile must still
hold the program's real call structure: every cuDNN/cuBLAS call under the region that made it,
exact convolution FLOPs from the program's own descriptors, the copies per direction, and an
iteration breakdown with t_h2d, t_f, t_b and t_u."""
import json
import os
import subprocess

import pytest

from conftest import CLI, clean_env, query, run

CNN = os.environ.get("SONDE_CNN", "")
STUBS = os.environ.get("SONDE_GPU_STUBS", "")

pytestmark = pytest.mark.skipif(
    not CNN or not STUBS,
    reason="cnn_train or the GPU stub libraries not built (CUDA toolkit and cuDNN are needed at "
           "configure time)")

STEPS = 12
BATCH = 64
# 2 x N x K x P x Q x C x R x S for each convolution of the network, N = 64.
CONV1_FLOPS = 2 * BATCH * 8 * 28 * 28 * 1 * 5 * 5
CONV2_FLOPS = 2 * BATCH * 16 * 14 * 14 * 8 * 5 * 5
FC_FLOPS = 2 * 10 * BATCH * 784
# The parameters momentum SGD updates: conv1 and conv2 weights and biases, the FC layer's.
PARAMS = 8 * 1 * 5 * 5 + 8 + 16 * 8 * 5 * 5 + 16 + 10 * 784 + 10


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    db = tmp_path_factory.mktemp("cnn") / "cnn.db"
    # CUPTI is kept out: the stub driver is not one the real libcupti accepts (docs/gpu.md).
    r = run([CNN, "--steps", STEPS, "--eval-every", 0, "--batch", BATCH], db,
            LD_LIBRARY_PATH=STUBS, SONDE_CUPTI_LIBRARY="/nonexistent/libcupti.so.13")
    assert r.returncode == 0, r.stderr
    assert "final loss" in r.stdout
    return db


def path_row(db, path):
    rows = query(db, "SELECT calls FROM callpaths WHERE path = ?", (path,))
    return rows[0][0] if rows else 0


def test_library_calls_sit_under_the_phase_that_made_them(profile):
    assert path_row(profile, "step;forward;cudnnConvolutionForward") == 2 * STEPS
    assert path_row(profile, "step;forward;cublasSgemm_v2") == STEPS
    assert path_row(profile, "step;backward;cudnnConvolutionBackwardFilter") == 2 * STEPS
    assert path_row(profile, "step;backward;cudnnConvolutionBackwardData") == STEPS
    assert path_row(profile, "step;backward;cublasSgemm_v2") == 2 * STEPS
    assert path_row(profile, "step;h2d;cudaMemcpy HtoD") == STEPS
    assert path_row(profile, "step;loss;cudaMemcpy DtoH") == STEPS
    assert path_row(profile, "step;loss;cudaMemcpy HtoD") == STEPS


def test_level_1_and_2_calls_and_bias_kernels_are_routines_of_their_own(profile):
    # On an H200 their kernels (axpy_kernel_val, scal_kernel_val, calc_bias_diff, the bias add)
    # showed straight under the regions: cuBLAS levels 1-2 and cuDNN's bias calls were not
    # intercepted. Each is now a routine under its phase, with the CPU BLAS models' FLOPs.
    assert path_row(profile, "step;forward;cudnnAddTensor") == 2 * STEPS
    assert path_row(profile, "step;forward;cublasSger_v2") == STEPS
    assert path_row(profile, "step;backward;cublasSgemv_v2") == STEPS
    assert path_row(profile, "step;backward;cudnnConvolutionBackwardBias") == 2 * STEPS
    assert path_row(profile, "step;update;cublasSscal_v2") == 6 * STEPS
    assert path_row(profile, "step;update;cublasSaxpy_v2") == 12 * STEPS
    # v = momentum v (1 FLOP an element), v += g and w -= lr v (2 each).
    (flops,) = query(profile, "SELECT SUM(flops) FROM callpaths WHERE path LIKE 'step;update;%'")[0]
    assert flops == STEPS * 5 * PARAMS


def test_convolution_and_gemm_flops_come_from_the_programs_descriptors(profile):
    [(conv,)] = query(profile, "SELECT SUM(n.flops) FROM nodes n JOIN routines r USING "
                               "(routine_id) JOIN nodes p ON p.node_id = n.parent_id JOIN routines "
                               "pr ON pr.routine_id = p.routine_id WHERE r.name = "
                               "'cudnnConvolutionForward' AND pr.name = 'forward'")
    assert conv == STEPS * (CONV1_FLOPS + CONV2_FLOPS)
    shapes = query(profile, "SELECT m, n, k, dtype, calls FROM gemm_shapes "
                            "WHERE routine = 'cublasSgemm_v2' ORDER BY m, n, k")
    assert (10, BATCH, 784, "f32") in [s[:4] for s in shapes]  # forward: W^T p2
    [(copied,)] = query(profile, "SELECT SUM(n.bytes) FROM nodes n JOIN routines r USING "
                                 "(routine_id) JOIN nodes p ON p.node_id = n.parent_id JOIN "
                                 "routines pr ON pr.routine_id = p.routine_id WHERE r.name = "
                                 "'cudaMemcpy HtoD' AND pr.name = 'h2d'")
    assert copied == STEPS * BATCH * 784 * 4


def test_iteration_breakdown_of_the_gpu_workload(profile):
    out = subprocess.run([CLI, "metrics", profile, "--section", "breakdown", "--format", "json"],
                         capture_output=True, text=True, env=clean_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    b = json.loads(out.stdout)["breakdown"]
    assert b["iterations"] == STEPS and b["iterations_from"] == "t_u"
    phases = {p["phase"]: p for p in b["phases"]}
    assert phases["t_h2d"]["routines"].split(", ")[0] in ("h2d", "cudaMemcpy HtoD")
    assert "h2d" in phases["t_h2d"]["routines"] and "cudaMemcpy HtoD" in phases["t_h2d"]["routines"]
    # The loss is computed in the forward pass (as PyTorch's loss modules are).
    for phase, region in (("t_f", "forward, loss"), ("t_b", "backward"), ("t_u", "update"),
                          ("t_io", "data")):
        assert phases[phase]["routines"] == region, phases
