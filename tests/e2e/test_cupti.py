"""CUPTI without a GPU: cupti_app drives a stub libcupti.so.13 (tests/stubs/cupti) that calls
sonde's subscriber back for each API call the program names and fills sonde's activity buffers
with real CUpti_Activity records. The profile must tie each kernel and copy to the call path
that launched it, keep every record across periodic flushes and at exit, count each runtime
call once, and, when CUPTI or the driver is missing or held by another tool, say so once and
profile the CPU side as usual."""
import json
import os
from pathlib import Path

import pytest

from conftest import BIN, CLI, query, routine_calls, run

STUBS = os.environ.get("SONDE_CUPTI_STUBS", "")
pytestmark = pytest.mark.skipif(
    not STUBS, reason="CUPTI headers absent at configure time: no CUPTI backend, no stub")

CUPTI = str(Path(STUBS) / "libcupti.so.13")
DRIVER_DIR = str(Path(STUBS) / "driver")
MS = 1_000_000


def run_app(db, mode="basic", program="cupti_app", driver=True, **env):
    env.setdefault("SONDE_CUPTI_LIBRARY", CUPTI)
    if driver:
        env["LD_LIBRARY_PATH"] = DRIVER_DIR
    r = run([BIN / program, mode], db=db, **env)
    assert r.returncode == 0, r.stderr
    assert f"done {mode}" in r.stdout
    return r


def gpu_rows(db, kind=None):
    sql = ("SELECT g.kind, g.name, g.bytes, g.start_ns, g.end_ns, r.name, pr.name "
           "FROM gpu_activity g LEFT JOIN nodes n USING (node_id) "
           "LEFT JOIN routines r ON r.routine_id = n.routine_id "
           "LEFT JOIN nodes pn ON pn.node_id = n.parent_id "
           "LEFT JOIN routines pr ON pr.routine_id = pn.routine_id")
    rows = query(db, sql)
    return [row for row in rows if kind is None or row[0] == kind]


def notes(db, topic_prefix="gpu"):
    return [m for (t, m) in query(db, "SELECT topic, message FROM notes")
            if t.startswith(topic_prefix)]


def cpu_side_normal(db):
    incl = query(db, "SELECT SUM(incl_s) FROM hotspots WHERE routine = 'cpu_work'")[0][0]
    assert incl is not None and incl >= 0.025  # spins 30 ms
    assert query(db, "SELECT COUNT(*) FROM processes WHERE end_reason = 'exit'") == [(1,)]


@pytest.mark.parametrize("program", ["cupti_app", "cupti_app_linked"])
def test_kernels_and_copies_land_under_the_call_path_that_launched_them(db, program):
    r = run_app(db, program=program)
    assert "traced_by_cupti=1" in r.stdout  # the preloaded runtime wrappers stand down
    kernels = gpu_rows(db, "kernel")
    assert sorted(k[1] for k in kernels) == sorted(
        ["matmul(float*, float*, float*, int)"] * 3 + ["relu(float*, int)"] * 2 + ["directKer()"])
    for _, name, _, _, _, routine, parent in kernels:
        expected = {"matmul(float*, float*, float*, int)": ("cudaLaunchKernel", "train_step"),
                    "relu(float*, int)": ("cudaLaunchKernel", "eval"),
                    "directKer()": ("cuLaunchKernel", "direct")}[name]
        assert (routine, parent) == expected
    # The stub's clock is an hour off CLOCK_REALTIME: converted, the GPU work lies inside the
    # process's lifetime.
    (started, ended), = query(db, "SELECT started_ns, ended_ns FROM processes")
    for row in gpu_rows(db):
        assert started <= row[3] <= row[4] <= ended
    assert notes(db) == []


def test_an_nvcc_13_launch_is_named_as_the_program_wrote_it(db):
    # nvcc 13 compiles kernel<<<...>>> to __cudaLaunchKernel, which CUPTI calls
    # __cudaLaunchKernel_v13000: the profile says cudaLaunchKernel, as the preloaded wrapper does.
    run_app(db, "nvcc13")
    assert [(k[1], k[5], k[6]) for k in gpu_rows(db, "kernel")] == [
        ("step()", "cudaLaunchKernel", "step")]


def test_gpu_kernels_view(db):
    run_app(db)
    rows = query(db, "SELECT kernel, call_path, calls, time_s, grid, block, registers "
                     "FROM gpu_kernels ORDER BY kernel")
    assert rows == [
        ("directKer()", "direct;cuLaunchKernel", 1, pytest.approx(0.001), 1.0, 32.0, 8.0),
        ("matmul(float*, float*, float*, int)", "train_step;cudaLaunchKernel", 3,
         pytest.approx(0.006), 128.0, 256.0, 32.0),
        ("relu(float*, int)", "eval;cudaLaunchKernel", 2, pytest.approx(0.002), 64.0, 128.0,
         16.0),
    ]


def test_copies_carry_direction_and_bytes(db):
    run_app(db)
    copies = gpu_rows(db, "memcpy")
    htod = [c for c in copies if c[1] == "memcpy HtoD"]
    dtoh = [c for c in copies if c[1] == "memcpy DtoH"]
    assert [c[2] for c in htod] == [1 << 20] * 3
    assert [(c[2], c[5], c[6]) for c in dtoh] == [(4096, "cudaMemcpy DtoH", "eval")]
    assert all(c[5:] == ("cudaMemcpy HtoD", "train_step") for c in htod)
    (memset,) = gpu_rows(db, "memset")
    assert memset[2] == 512 and memset[5:] == ("cudaMemset", "eval")
    # The CPU side of the same calls: the routine names the preloaded wrappers use.
    assert routine_calls(db, "cudaMemcpy HtoD") == 3
    assert query(db, "SELECT SUM(n.bytes) FROM nodes n JOIN routines r USING (routine_id) "
                     "WHERE r.name = 'cudaMemcpy HtoD'") == [(3.0 * (1 << 20),)]


def test_tree_shows_gpu_time_apart_from_cpu_time(db):
    run_app(db)
    text = run([CLI, "tree", db, "--min-pct", "0"])
    assert text.returncode == 0, text.stderr
    assert "excl s      gpu s       calls  name" in text.stdout
    r = run([CLI, "tree", db, "--min-pct", "0", "-f", "json"])
    (main,) = [t["tree"] for t in json.loads(r.stdout)["trees"] if t["seq"] == 0]
    by_name = {c["name"]: c for c in main["children"]}
    # train_step: three 2 ms kernels and three 0.5 ms copies on the GPU.
    assert by_name["train_step"]["gpu_s"] == pytest.approx(0.0075)
    assert by_name["train_step"]["incl_s"] < 0.0075  # its CPU time is the API calls only
    assert by_name["eval"]["gpu_s"] == pytest.approx(0.00275)
    assert by_name["cpu_work"]["gpu_s"] == 0
    assert main["gpu_s"] == pytest.approx(0.01125)


def test_profile_without_gpu_has_no_gpu_column(db):
    r = run([BIN / "page_touch"], db=db)
    assert r.returncode == 0, r.stderr
    text = run([CLI, "tree", db, "--min-pct", "0"])
    assert "gpu s" not in text.stdout and "excl s       calls  name" in text.stdout


def test_runtime_calls_are_counted_once(db):
    run_app(db)
    # Five runtime launches, each calling cuLaunchKernel inside; one direct driver launch.
    assert routine_calls(db, "cudaLaunchKernel") == 5
    assert routine_calls(db, "cuLaunchKernel") == 1
    assert query(db, "SELECT kind, library FROM routines WHERE name = 'cudaLaunchKernel'") == [
        ("cuda", "cudart")]


def test_subscribing_inside_a_runtime_call(db):
    # The runtime's first call opens the driver, so CUPTI starts inside it: its exit arrives
    # without an entry (and with whatever CUPTI left in correlationData). Nothing is closed
    # that sonde did not open, and later calls nest as usual.
    run_app(db, "midcall")
    assert routine_calls(db, "cudaLaunchKernel") == 1
    assert routine_calls(db, "cuLaunchKernel") == 1  # the direct one; the nested one is not
    assert query(db, "SELECT r.name, pr.name FROM nodes n JOIN routines r USING (routine_id) "
                     "JOIN nodes pn ON pn.node_id = n.parent_id "
                     "JOIN routines pr ON pr.routine_id = pn.routine_id "
                     "WHERE r.kind = 'cuda' ORDER BY r.name") == [
        ("cuLaunchKernel", "after"), ("cudaLaunchKernel", "after")]
    assert query(db, "SELECT message FROM notes WHERE topic = 'regions'") == []
    (kernel,) = gpu_rows(db, "kernel")
    assert kernel[1] == "after()" and kernel[5:] == ("cudaLaunchKernel", "after")


def test_no_record_lost_across_periodic_flushes(db):
    run_app(db, "periodic", SONDE_FLUSH_INTERVAL="0.1")
    assert query(db, "SELECT flushes FROM processes")[0][0] >= 4
    kernels = gpu_rows(db, "kernel")
    assert len(kernels) == 8  # each written once, none lost, none twice
    assert len({k[3] for k in kernels}) == 8
    assert all(k[5:] == ("cudaLaunchKernel", "step") for k in kernels)
    assert query(db, "SELECT value FROM run_info WHERE key = 'gpu.records'") == [("8",)]
    assert query(db, "SELECT value FROM run_info WHERE key = 'gpu.dropped'") == [("0",)]


def test_kernel_of_an_ended_thread_keeps_its_call_path(db):
    run_app(db, "late", SONDE_FLUSH_INTERVAL="0.1")
    (kernel,) = gpu_rows(db, "kernel")
    assert kernel[1] == "late()" and kernel[5:] == ("cudaLaunchKernel", "worker")
    # The launching thread is not the main thread, and it ended before the record came.
    assert query(db, "SELECT t.seq, t.ended_ns IS NOT NULL FROM gpu_activity g "
                     "JOIN nodes n USING (node_id) JOIN threads t USING (thread_id)") == [(1, 1)]


def test_cupti_held_by_another_tool(db):
    r = run_app(db, CUPTI_STUB_HELD_BY="Nsight Systems")
    assert "traced_by_cupti=0" in r.stdout  # the preloaded wrappers keep measuring
    (note,) = notes(db)
    assert "Nsight Systems" in note
    assert r.stderr.count("Nsight Systems") == 1
    assert gpu_rows(db) == []
    assert routine_calls(db, "cudaLaunchKernel") == 0
    cpu_side_normal(db)


def test_no_device(db):
    # A driver but no device: the API calls are still measured through the callbacks (and the
    # preloaded wrappers stand down), kernels and copies are not; one note says so.
    r = run_app(db, CUPTI_STUB_NO_DEVICE="1")
    assert "traced_by_cupti=1" in r.stdout
    (note,) = notes(db)
    assert "CUPTI_ERROR_NOT_INITIALIZED" in note and "kernels and copies are not" in note
    assert gpu_rows(db) == []
    assert routine_calls(db, "cudaLaunchKernel") == 5
    assert routine_calls(db, "cudaMemcpy HtoD") == 3
    cpu_side_normal(db)


def test_no_cupti(db):
    r = run_app(db, SONDE_CUPTI_LIBRARY="/nonexistent/libcupti.so.13")
    assert "traced_by_cupti=0" in r.stdout
    (note,) = notes(db)
    assert "libcupti" in note and "SONDE_CUPTI_LIBRARY" in note
    assert gpu_rows(db) == []
    cpu_side_normal(db)


def test_no_driver(db):
    r = run_app(db, driver=False)
    assert "no driver" in r.stdout and "traced_by_cupti=0" in r.stdout
    (note,) = notes(db)
    assert "no CUDA driver" in note and "libcuda.so.1" in note
    assert gpu_rows(db) == []
    cpu_side_normal(db)


def test_a_process_without_cuda_never_starts_cupti(db):
    # page_touch uses no CUDA: no GPU note, no GPU row, even with a CUPTI that would work.
    r = run([BIN / "page_touch"], db=db, SONDE_CUPTI_LIBRARY=CUPTI, LD_LIBRARY_PATH=DRIVER_DIR)
    assert r.returncode == 0, r.stderr
    assert notes(db) == []
    assert gpu_rows(db) == []
    assert query(db, "SELECT COUNT(*) FROM run_info WHERE key LIKE 'gpu.%'") == [(0,)]
