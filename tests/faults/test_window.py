"""The collection window (issue 15) beyond the CPU's calls: GPU activity held back with the
launches made before it (the CUPTI stub), and --delay counted from the launch for every process
of the run, so a child exec'd late opens at the run's instant, not S seconds after its own
start."""
import os
from pathlib import Path

import pytest

from conftest import (calls, notes, plain, preloaded, profile_whole, prog, query, same_behaviour,
                      sonde_run)

HOST = prog("window_steps")
BUILD = Path(os.environ.get("SONDE_BUILD", "."))
STUBS = BUILD / "tests/stubs/cupti/lib"
CUPTI_APP = BUILD / "tests/e2e/bin/cupti_app"
needs_cupti = pytest.mark.skipif(not (STUBS / "libcupti.so.13").exists() or
                                 not CUPTI_APP.exists(),
                                 reason="built without CUPTI headers: no CUPTI stub")


def cupti_env():
    return {"SONDE_CUPTI_LIBRARY": STUBS / "libcupti.so.13",
            "LD_LIBRARY_PATH": STUBS / "driver"}


def same_app(alone, profiled):
    # cupti_app prints whether CUPTI traces its calls: 1 only under sonde.
    assert (profiled.rc, profiled.out.replace("traced_by_cupti=1", "traced_by_cupti=0")) == \
        (alone.rc, alone.out), profiled.err
    assert "done basic" in profiled.out


def gpu_rows(db):
    return sorted(query(db, "SELECT g.kind, g.name, r.name FROM gpu_activity g "
                            "LEFT JOIN nodes n USING (node_id) "
                            "LEFT JOIN routines r ON r.routine_id = n.routine_id"))


@needs_cupti
def test_gpu_records_wait_for_the_window(db):
    """window: --steps 2 over cupti_app's 3 train steps: the GPU records of step 3 on, none before"""
    cmd = [CUPTI_APP, "basic"]
    profiled = sonde_run(cmd, db, args=["--steps", "2", "--step-region", "train_step"],
                         env_extra=cupti_env())
    same_app(plain(cmd, env_extra=cupti_env()), profiled)
    profile_whole(db)
    # Steps 1 and 2 launched a matmul and copied 1 MB each: neither is in the profile (before:
    # both stored, on the root, 11 records for 7 launches measured).
    launch, copy = "cudaLaunchKernel", "cudaMemcpy"
    assert gpu_rows(db) == sorted([
        ("kernel", "matmul(float*, float*, float*, int)", launch),
        ("kernel", "relu(float*, int)", launch), ("kernel", "relu(float*, int)", launch),
        ("kernel", "directKer()", "cuLaunchKernel"),
        ("memcpy", "memcpy HtoD", copy + " HtoD"), ("memcpy", "memcpy DtoH", copy + " DtoH"),
        ("memset", "memset", "cudaMemset")])
    held = query(db, "SELECT value FROM run_info WHERE key = 'gpu.before_window'")
    assert held == [("4",)], held


@needs_cupti
def test_gpu_records_of_a_window_that_never_opened(db):
    """window: --steps 5 over cupti_app's 3 train steps: no GPU record at all, the note says why"""
    cmd = [CUPTI_APP, "basic"]
    profiled = sonde_run(cmd, db, args=["--steps", "5", "--step-region", "train_step"],
                         env_extra=cupti_env())
    same_app(plain(cmd, env_extra=cupti_env()), profiled)
    profile_whole(db)
    assert gpu_rows(db) == []
    assert any("never opened" in n for n in notes(db))


def test_delay_counts_from_the_launch_for_an_execd_child(db):
    """window: --delay 0.5, a child exec'd 0.8 s after the launch: open from its start, all 12 calls"""
    cmd = ["sh", "-c", f"sleep 0.8; exec {HOST} delay"]
    profiled = sonde_run(cmd, db, args=["--delay", "0.5"])
    same_behaviour(plain(cmd), profiled)
    profile_whole(db)
    # Before: the child counted 0.5 s from its own start and dropped its 5 dgemm calls.
    assert (calls(db, "cblas_dgemm"), calls(db, "cblas_sgemm")) == (5, 7)
    said = [n for n in notes(db) if "collection began as the process started" in n]
    assert said, notes(db)


def test_delay_by_hand_counts_from_each_process(db):
    """window: SONDE_DELAY=0.5 by hand (no sonde run): a child exec'd late waits its own 0.5 s"""
    cmd = ["sh", "-c", f"sleep 0.8; exec {HOST} delay"]
    profiled = preloaded(cmd, db, env_extra={"SONDE_DELAY": "0.5"})
    assert profiled.rc == 0 and profiled.out, profiled.err  # the cell above compares outputs
    profile_whole(db)
    assert (calls(db, "cblas_dgemm"), calls(db, "cblas_sgemm")) == (0, 7)
    assert any("collection began 0.500 s after the process started" in n for n in notes(db))
