"""Adaptive timing (SONDE_ADAPTIVE, `sonde run --adaptive`): counts exact, the times of tiny hot
call paths scaled from a random sample of their calls and marked as such, the host unchanged."""
import statistics
import subprocess

import pytest

from conftest import (calls, plain, preloaded, prog, profile_whole, query, same_behaviour,
                      sonde_run)

HOST = prog("adaptive_dot")
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


def test_threads_results_unchanged(tmp_path):
    """adaptive: 4 threads of tiny sdot and sgemm calls, 0.1 s flushes: same output, exact counts"""
    db = str(tmp_path / "prof.db")
    cmd = [HOST, "60000", "64", "4", "gemm"]
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD)
    profiled = sonde_run(cmd, db, args=["--adaptive", "--flush-interval", "0.1"],
                         env_extra=ONE_BLAS_THREAD)
    same_behaviour(alone, profiled)
    report = profile_whole(db)
    assert calls(db, "cblas_sdot") == 4 * 60000
    assert calls(db, "cblas_sgemm") == 4 * 60000
    assert query(db, "SELECT COALESCE(SUM(calls), 0) FROM shapes") == [(4 * 60000,)]
    # Every thread's sdot path was sampled after its 10,000-call warm-up, 1 call in 16 timed.
    # The 4x4 sgemm is ~0.1 us alone but its OpenBLAS buffer lock makes it ~1-1.8 us with 2+
    # threads on two CPUs (without sonde too: 0.01 -> 0.17 s for 200,000 calls a thread), on
    # the 1 us line: a path whose warm-up median was longer is timed in full, as it should be.
    paths = query(db, "SELECT r.name, n.incl_ns * 1.0 / n.calls, t.warm_calls, t.sampled_calls, "
                      "t.timed_calls, t.incl_se_ns FROM nodes n JOIN routines r USING (routine_id) "
                      "LEFT JOIN node_timing t USING (node_id) WHERE r.name LIKE 'cblas_s%'")
    assert len(paths) == 8, paths
    rows = []
    for name, mean_ns, *timing in paths:
        if name == "cblas_sgemm" and timing[0] is None:
            assert mean_ns > 500, paths  # not sampled: its calls were not short
            continue
        rows.append(timing)
    assert len(rows) >= 4, paths
    for warm, sampled, timed, se in rows:
        assert warm == 10000 and sampled == 50000
        assert abs(timed - sampled / 16) < 0.15 * sampled / 16, (timed, sampled)
        assert se >= 0
    assert query(db, "SELECT value FROM run_info WHERE key = 'adaptive.rate'") == [("16",)]
    # The report marks the scaled rows and says what the mark means.
    assert "cblas_sdot [blas] ~±" in report
    assert "~ times scaled from a random sample of calls" in report


def test_off_by_default_and_with_trace(tmp_path):
    """adaptive: off by default, and ignored (one line) with SONDE_TRACE: every call timed"""
    cmd = [HOST, "20000", "64", "1"]
    off, traced = str(tmp_path / "off.db"), str(tmp_path / "trace.db")
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD)
    same_behaviour(alone, preloaded(cmd, off, env_extra=ONE_BLAS_THREAD))
    with_trace = preloaded(cmd, traced, env_extra={**ONE_BLAS_THREAD, "SONDE_ADAPTIVE": "1",
                                                  "SONDE_TRACE": "1"})
    same_behaviour(alone, with_trace)
    assert with_trace.err.count("SONDE_ADAPTIVE is ignored") == 1
    for db in (off, traced):
        profile_whole(db)
        assert query(db, "SELECT COUNT(*) FROM node_timing") == [(0,)]
    assert query(traced, "SELECT COUNT(*) FROM trace_events t JOIN nodes n USING (node_id) "
                         "JOIN routines r USING (routine_id) WHERE r.name = 'cblas_sdot'") \
        == [(20000,)]


def fifo_available():
    try:
        return subprocess.run(["chrt", "-f", "1", "true"], capture_output=True).returncode == 0
    except OSError:
        return False


def per_call_ns(db):
    """sdot's time a call, its calls, its relative error, and its thread's whole time a call."""
    return query(db, "SELECT n.incl_ns * 1.0 / n.calls, n.calls, t.incl_se_ns * 1.0 / n.incl_ns, "
                     "p.incl_ns * 1.0 / n.calls "
                     "FROM nodes n JOIN routines r USING (routine_id) "
                     "JOIN nodes p ON p.node_id = n.parent_id "
                     "LEFT JOIN node_timing t USING (node_id) WHERE r.name = 'cblas_sdot'")[0]


def test_known_cost_near_full_timing(tmp_path):
    """adaptive: sdot of 6,144 floats (~0.4 us), scaled time under its run's thread time, near full timing"""
    # Wall-clock timing on a loaded machine charges other processes' time slices to whatever
    # call was running: real-time priority keeps both runs free of it, so both measure the call.
    if not fifo_available():
        pytest.skip("needs chrt -f (SCHED_FIFO) for runs free of preemption")
    calls_each = 400000
    cmd = ["chrt", "-f", "1", HOST, str(calls_each), "6144", "1"]
    full, scaled = [], []
    for i in range(3):
        for adaptive in ("0", "1"):
            db = str(tmp_path / f"kd{i}{adaptive}.db")
            r = preloaded(cmd, db, env_extra={**ONE_BLAS_THREAD, "SONDE_ADAPTIVE": adaptive})
            assert r.rc == 0, r.err
            ns, n, rel_se, thread_ns = per_call_ns(db)
            assert n == calls_each
            if adaptive == "1":
                # A path is sampled where its first 10,000 calls' median is under 1 us: on this
                # 2-vCPU VM a CI run's other tests beside the cell made the calls that slow now
                # and then (a clean-clone CI of 2026-12-07), and the path was rightly timed in
                # full. Then its mean call, measured whole, says so.
                if rel_se is None:
                    assert ns > 700, f"the known-cost path was not sampled ({ns:.0f} ns a call)"
                    continue
                # The thread's wall time bounds its calls' (the loop costs ~30 ns a call more):
                # a stall scaled 16-fold passes it, whatever the machine did in the other runs.
                assert ns < thread_ns, (ns, thread_ns)
                scaled.append((ns, rel_se))
            else:
                assert rel_se is None
                full.append(ns)
    # Near full timing, not to its 2 %: the machine's stalls (interrupts, the hypervisor; 1 call
    # in 2,000 here, ~50 us each, ~7 % of the time), which full timing counts inside every call
    # they land in, are counted once when they land in a timed call (clipped at 8x the mean, the
    # rest once), so the scaled time reads a few % under (335-341 against 343-347 ns here,
    # quiet, FIFO), more where the machine stalls more. Runs also differ among themselves by up
    # to 10 % (356-401 ns fully timed, FIFO, one busy loop beside). The exact arithmetic is the
    # unit tests' (adaptive_timing_test.cpp, chosen ticks, within 2 %); this cell catches what
    # is grossly wrong on real calls: a stall scaled whole (+48 %), the machine's stalls taken
    # for the routine's tail and scaled (+12 to +17 %, all three runs of a CI run when the
    # switch was at 1 in 1,000), a wrong scale (2x, or half), nothing sampled. Below, loosely:
    # under ctest -j2 the fully timed runs read 447-531 ns (the machine's time counted in every
    # call) where the scaled ones read 368-502.
    if scaled:
        got = statistics.median(ns for ns, _ in scaled)
        assert 0.70 * min(full) < got < 1.10 * max(full), (full, scaled)
