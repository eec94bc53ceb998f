"""CUPTI over a run's whole life, as the real library behaves (tests/stubs/cupti): graph launches
whose kernels share one correlation id and finish over several flushes, buffers completed from
CUPTI's own thread, a second activity client (Kineto) taking the buffers, contexts destroyed by
the CUDA runtime's exit handlers before sonde's run, a forced flush that never returns, another
tool injected through CUDA_INJECTION64_PATH, and CUDA 13.2's shared subscription."""
import re
import time
from pathlib import Path

import pytest

from conftest import BIN, query, routine_calls, run
from test_cupti import CUPTI, DRIVER_DIR, STUBS, cpu_side_normal, gpu_rows, notes, run_app

pytestmark = pytest.mark.skipif(
    not STUBS, reason="CUPTI headers absent at configure time: no CUPTI backend, no stub")


def gave(db):
    """The gpu-other-client notes but the one of taking CUPTI back: the client unsubscribes
    just before the exit, which may come first."""
    return [n for n in notes(db, "gpu-other-client") if "took it back" not in n]


def gave_and_took(db):
    """The two gpu-other-client notes: sonde giving CUPTI up, and taking it back."""
    found = notes(db, "gpu-other-client")
    took = [n for n in found if "took it back" in n]
    assert len(found) == 2 and len(took) == 1, found
    return [n for n in found if n not in took][0], took[0]


def info(db, key):
    rows = query(db, "SELECT value FROM run_info WHERE key = ?", (key,))
    return rows[0][0] if rows else None


@pytest.mark.parametrize("per_buffer", [None, "1"])
def test_every_kernel_of_a_graph_launch_keeps_its_call_path(db, per_buffer):
    # Four kernels of one cudaGraphLaunch carry its correlation id; the first flush sees one,
    # the next two more, the exit the last. With one record per buffer the stub's own thread
    # hands the buffers back, between sonde's flushes.
    env = {"CUPTI_STUB_RECORDS_PER_BUFFER": per_buffer} if per_buffer else {}
    run_app(db, "graph", **env)
    kernels = sorted((k[1], k[5], k[6]) for k in gpu_rows(db, "kernel"))
    assert kernels == [(f"node{i}()", "cudaGraphLaunch", "graph") for i in range(4)]
    assert info(db, "gpu.unattributed") == "0"
    assert routine_calls(db, "cudaGraphLaunch") == 1


def test_a_later_activity_client_is_said_and_keeps_its_records(db):
    # torch.profiler inside a run under sonde: Kineto registers its own buffer callbacks and
    # disables kernel records when it stops. It gets its records as it would alone; sonde keeps
    # what came before, and says from when its profile lacks GPU activity.
    r = run_app(db, "kineto")
    assert "kineto subscribe=-1 register=0 api=0 records=1" in r.stdout
    assert [k[1] for k in gpu_rows(db, "kernel")] == ["before()"]
    (registered,) = notes(db, "gpu-other-client")  # its disabling later changes nothing more
    assert "cupti_app" in registered and "registered its own CUPTI activity buffers" in registered
    assert routine_calls(db, "cudaLaunchKernel") == 2  # the API side goes on


def test_a_later_subscriber_is_given_cupti(db):
    # torch.profiler inside a run under sonde, as Kineto starts: it subscribes first. Before
    # CUDA 13.2 CUPTI takes one subscriber; with sonde holding it Kineto's cuptiSubscribe failed
    # and torch.profiler recorded no GPU activity (seen on an H200). sonde now steps aside: the
    # subscription succeeds, Kineto gets its callbacks (the launch's entry and exit at least)
    # and its records; sonde keeps what came before and says from when its profile lacks GPU
    # activity.
    r = run_app(db, "kineto_subscribes")
    m = re.search(r"kineto subscribe=(\d+) register=(\d+) api=(\d+) records=(\d+)", r.stdout)
    assert m and m.group(1, 2, 4) == ("0", "0", "1") and int(m.group(3)) >= 2, r.stdout
    assert [k[1] for k in gpu_rows(db, "kernel")] == ["before()"]
    (note,) = gave(db)
    assert "cupti_app subscribed to CUPTI" in note and "gave its subscription up" in note
    # The launch before is measured through CUPTI; the one after reached only Kineto's callback
    # (the program makes it through the stub, not through a libcudart the wrappers measure).
    assert routine_calls(db, "cudaLaunchKernel") == 1


def test_a_client_whose_cupti_is_not_global_is_given_cupti(db):
    # PyTorch's Kineto links libcupti and is opened with RTLD_LOCAL: libcupti is not in the
    # global scope, and sonde's interposers found no real cuptiSubscribe with RTLD_NEXT (on an
    # H200 they answered CUPTI_ERROR_NOT_INITIALIZED, and torch.profiler had no GPU activity).
    # They find the loaded libcupti by its soname.
    r = run([BIN / "cupti_local_client", BIN / "libkineto_like.so"], db=db,
            SONDE_CUPTI_LIBRARY=CUPTI, LD_LIBRARY_PATH=DRIVER_DIR)
    assert r.returncode == 0 and "done local" in r.stdout, r.stderr
    m = re.search(r"subscribe=(\d+) register=(\d+) enable=(\d+) api=(\d+) records=(\d+)",
                  r.stdout)
    assert m and m.group(1, 2, 3, 5) == ("0", "0", "0", "1") and int(m.group(4)) >= 2, r.stdout
    (note,) = gave(db)
    assert "libkineto_like.so subscribed to CUPTI" in note


@pytest.mark.parametrize("mode,left,program,version", [
    ("kineto_leaves", "unsubscribed from", "cupti_app", None),
    ("kineto_finalizes", "finalized", "cupti_app", None),
    ("kineto_leaves", "unsubscribed from", "cupti_app12", None),  # CUDA 12: no cuptiSubscribe_v2
    # CUDA 13.3: sonde traces through its own subscription, and Kineto's process-wide calls
    # would be refused beside it.
    ("kineto_leaves", "unsubscribed from", "cupti_app", "130300"),
    ("kineto_finalizes", "finalized", "cupti_app", "130300"),
])
def test_cupti_is_taken_back_when_the_other_client_leaves(db, mode, left, program, version):
    # A scheduled torch.profiler window (steps 10-15 of a run): Kineto subscribes (sonde gives
    # its one subscription up) and registers its buffers; stopping, it disables its kinds,
    # flushes, and unsubscribes or finalizes CUPTI. sonde used to give the rest of the run's
    # GPU records away; it now takes CUPTI back once the call returned.
    env = {"SONDE_CUPTI_LIBRARY": str(Path(STUBS) / "cuda12" / "libcupti.so.12")
           } if program == "cupti_app12" else {}
    if version:
        env["CUPTI_STUB_VERSION"] = version
    r = run_app(db, mode, program=program, **env)
    m = re.search(r"kineto subscribe=(\d+) register=(\d+) left=(\d+) api=(\d+) records=(\d+) "
                  r"later=(\d+)", r.stdout)
    # The window's three kernels are the client's, delivered by its own flush; none later.
    assert m and m.group(1, 2, 3, 5, 6) == ("0", "0", "0", "3", "0"), r.stdout
    assert int(m.group(4)) >= 6, r.stdout  # its callback saw the window's launches
    kernels = sorted((k[1], k[5], k[6]) for k in gpu_rows(db, "kernel"))
    assert kernels == ([("after()", "cudaLaunchKernel", "after")] * 4 +
                       [("before()", "cudaLaunchKernel", "before")] * 2)
    assert routine_calls(db, "cudaLaunchKernel") == 6  # the window's reached only Kineto
    gave, took = gave_and_took(db)
    assert f"{program} subscribed to CUPTI" in gave
    assert f"{program} {left} CUPTI and sonde took it back" in took
    # The note names the window, in the timeline's clock: after the last kernel before it,
    # before the first kernel after it.
    t0, t1 = (int(t) for t in re.search(r"between (\d+) and (\d+) ns", took).groups())
    starts = {name: [k[3] for k in gpu_rows(db, "kernel") if k[1] == name]
              for name in ("before()", "after()")}
    assert max(starts["before()"]) < t0 < t1 < min(starts["after()"])


def test_a_second_tracer_of_cuda_13_3_gets_its_records_beside_sondes(db):
    # CUDA 13.3 traces several subscribers at once, each through the subscriber-scope calls:
    # a tool that joins for a window (Nsight Systems, a CUPTI-Python or JAX profiler) gets the
    # window's records and callbacks, and sonde keeps all of its own, with nothing given up.
    r = run_app(db, "v2_client", CUPTI_STUB_VERSION="130300")
    m = re.search(r"v2 subscribe=(\d+) register=(\d+) enable=(\d+) left=(\d+) api=(\d+) "
                  r"records=(\d+)", r.stdout)
    assert m and m.group(1, 2, 3, 4, 6) == ("0", "0", "0", "0", "3"), r.stdout
    assert int(m.group(5)) >= 6, r.stdout  # entry and exit of the window's three launches
    kernels = sorted((k[1], k[6]) for k in gpu_rows(db, "kernel"))
    assert kernels == ([("after()", "after")] * 2 + [("before()", "before")] +
                       [("inside()", "profiled")] * 3)
    assert routine_calls(db, "cudaLaunchKernel") == 6
    assert notes(db, "gpu-other-client") == []
    assert info(db, "gpu.cupti_activity") == "per-subscriber"
    assert notes(db) == []


@pytest.mark.parametrize("version", [None, "130300"])
def test_an_earlier_activity_client_keeps_its_buffers(db, version):
    # Kineto registered before the driver was loaded (so before sonde started): sonde must not
    # register its own buffers over them; it measures the CUDA calls and says why no kernels.
    # From 13.3 that includes not asking for records of its own, which CUPTI would refuse
    # beside the process-wide ones.
    r = run_app(db, "kineto_first", **({"CUPTI_STUB_VERSION": version} if version else {}))
    assert "kineto records=1" in r.stdout
    assert gpu_rows(db) == []
    (note,) = notes(db, "gpu-other-client")
    assert "cupti_app had registered its own CUPTI activity buffers before sonde" in note
    assert routine_calls(db, "cudaLaunchKernel") == 1


def test_kernel_records_disabled_by_another_library_are_said(db):
    run_app(db, "disable")
    assert [k[1] for k in gpu_rows(db, "kernel")] == ["before()"]
    (note,) = notes(db, "gpu-other-client")
    assert "cupti_app disabled CUPTI's kernel records" in note


def test_records_of_a_context_destroyed_at_exit_are_kept(db):
    # libcudart's exit handler (registered after sonde's, so run before it) destroys the
    # context; the records CUPTI still held for it are taken in the context-destroy callback.
    run_app(db, "teardown")
    kernels = gpu_rows(db, "kernel")
    assert [(k[1], k[5], k[6]) for k in kernels] == [("step()", "cudaLaunchKernel", "step")] * 2
    assert info(db, "gpu.contexts_flushed") == "1"


def test_a_final_flush_that_hangs_is_bounded(db):
    # A forced flush that never returns inside CUPTI: the exit goes on after the bound, with
    # one note, the CPU side and the exit status as without it.
    started = time.monotonic()
    r = run_app(db, "basic", CUPTI_STUB_FLUSH_HANG="1")
    assert time.monotonic() - started < 20
    (note,) = [m for m in notes(db) if "did not return" in m]
    assert "3 s" in note
    assert r.stderr.count("did not return") == 1
    cpu_side_normal(db)


def test_records_of_a_destroyed_context_survive_a_hanging_final_flush(db):
    run_app(db, "teardown", CUPTI_STUB_FLUSH_HANG="1")
    assert len(gpu_rows(db, "kernel")) == 2


def test_another_injected_tool_keeps_cupti(db):
    # Nsight Systems runs its collector as CUDA's injection library: sonde leaves CUPTI to it.
    r = run_app(db, CUDA_INJECTION64_PATH="/opt/nsight-systems/libToolsInjection64.so")
    assert "traced_by_cupti=0" in r.stdout
    (note,) = notes(db)
    assert "CUDA_INJECTION64_PATH" in note and "libToolsInjection64.so" in note
    assert gpu_rows(db) == []
    cpu_side_normal(db)


def test_cuda_13_2_shares_cupti_with_an_earlier_subscriber(db):
    # From CUPTI 13.2 a subscriber that allows others joins one already there (the header
    # field allowMultipleSubscribers); before, the same holder refuses sonde.
    r = run_app(db, CUPTI_STUB_HELD_BY="Nsight Systems", CUPTI_STUB_VERSION="130200")
    assert "traced_by_cupti=1" in r.stdout
    assert notes(db, "gpu-shared") == ["CUPTI is shared with Nsight Systems"]
    assert len(gpu_rows(db, "kernel")) == 6
