"""The sampler (SONDE_SAMPLE_HZ, `sonde run --sample N`): CPU-time samples with native stacks,
attributed to the shadow stack's node and kept apart from the exact figures; the host meets
no signal of it (its own SIGPROF timer and blocking calls behave as alone)."""
import os

import pytest

from conftest import (CLI, calls, clean_env, plain, preloaded, prog, profile_whole, query, run,
                      same_behaviour, sonde_run)

HOST = prog("sample_hot")
LEAF = "hot_update_loop [sample_hot]"


def exact(db):
    """Every node's path and call count: what sampling must leave untouched."""
    return sorted(query(db, "SELECT p.path, n.calls FROM node_paths p JOIN nodes n "
                            "USING (node_id) WHERE n.calls > 0"))


def under_region(db, region):
    """Samples whose innermost frame is the host's hot loop, under `region`, and all samples."""
    hot = query(db, "SELECT COALESCE(SUM(count), 0) FROM sampled_paths WHERE path = ? "
                    "AND leaf = ?", (region, LEAF))[0][0]
    total = query(db, "SELECT COALESCE(SUM(count), 0) FROM samples")[0][0]
    return hot, total


def test_hot_loop_found_under_its_region(tmp_path):
    """sampler: a native hot loop found under its region, exact counts untouched"""
    off, on = str(tmp_path / "off.db"), str(tmp_path / "on.db")
    alone = plain([HOST])
    without = sonde_run([HOST], off)
    with_ = sonde_run([HOST], on, args=["--sample", "1000"])
    same_behaviour(alone, without)
    same_behaviour(alone, with_)
    profile_whole(on)
    # Default off: no sample, no signal.
    assert query(off, "SELECT COUNT(*) FROM samples") == [(0,)]
    assert exact(on) == exact(off)
    assert calls(on, "cblas_sgemm") == 3
    hot, total = under_region(on, "update")
    # 0.4 s of CPU in the loop at 1 kHz: about 400 samples (the kernel's tick merges periods,
    # counted as the timer's overruns).
    assert 200 <= hot <= 800, (hot, total)
    assert hot >= 0.8 * total, (hot, total)
    tree = run([CLI, "tree", on], env=clean_env())
    assert tree.rc == 0 and "[sampled]" in tree.out and LEAF in tree.out, tree.out


@pytest.mark.parametrize("mode", ["preload", "sonde-run"])
def test_host_sigprof_and_eintr_unchanged(mode, db):
    """sampler: a host with its own SIGPROF timer and EINTR-sensitive calls behaves the same"""
    alone = plain([HOST, "hostile"])
    assert "sigprof ticked, handler kept, eintr 0, read 20" in alone.out, alone.out
    if mode == "preload":
        profiled = preloaded([HOST, "hostile"], db, env_extra={"SONDE_SAMPLE_HZ": "1000"})
    else:
        profiled = sonde_run([HOST, "hostile"], db, args=["--sample", "1000"])
    same_behaviour(alone, profiled)
    profile_whole(db)
    hot, _ = under_region(db, "update")
    assert hot > 100


def test_samples_begin_when_the_window_opens(db):
    """sampler: a collection window (SONDE_DELAY 0.05 s) then 1 kHz samples: the samples from its opening on, not none"""
    # A perf event fires once per refresh, and the handler's early return while the window was
    # closed skipped the refresh: the first signal before the window opened was the thread's
    # last, and the run had 0 samples (tests/e2e's launcher cell passed by the luck of a slow
    # start, 2 runs in 6).
    alone = plain([HOST])
    profiled = preloaded([HOST], db, env_extra={"SONDE_SAMPLE_HZ": "1000", "SONDE_DELAY": "0.05"})
    same_behaviour(alone, profiled)
    profile_whole(db)
    (n,) = query(db, "SELECT COALESCE(SUM(count), 0) FROM samples")[0]
    assert n > 100, n


def test_fork_as_openblas_starts_its_pool(db):
    """sampler: a fork at main's start, while OpenBLAS's constructor starts its worker threads, 12 times: never a hang"""
    # OpenBLAS's fork handler joins its workers; one starting under the sampler waited for the
    # lock sonde's own fork handler (run first) held through the fork: the host hung, 1 run in
    # about 10 on a loaded machine (a worker's start attaches it to sample its CPU). It gives
    # way now while a fork is under way.
    alone = plain([HOST, "fork"])
    for _ in range(12):
        profiled = preloaded([HOST, "fork"], db, env_extra={"SONDE_SAMPLE_HZ": "1000"},
                             timeout=20)
        same_behaviour(alone, profiled)
        profile_whole(db)
        os.unlink(db)


def test_fork_child_samples_its_own(db):
    """sampler: a fork child samples its own thread from its own timer"""
    alone = plain([HOST, "fork"])
    profiled = preloaded([HOST, "fork"], db, env_extra={"SONDE_SAMPLE_HZ": "1000"})
    same_behaviour(alone, profiled)
    child = query(db, "SELECT COALESCE(SUM(s.count), 0) FROM sampled_paths s JOIN threads t "
                      "USING (thread_id) JOIN processes p USING (process_id) "
                      "WHERE p.origin = 'fork' AND s.path = 'child_work'")[0][0]
    parent_in_child_region = query(
        db, "SELECT COUNT(*) FROM sampled_paths s JOIN threads t USING (thread_id) "
            "JOIN processes p USING (process_id) WHERE p.origin = 'root' AND s.path = "
            "'child_work'")[0][0]
    assert 100 <= child <= 400, child
    assert parent_in_child_region == 0


def test_unwinder_fault_costs_the_sample_not_the_host(db):
    """sampler: unwind information that leads into unmapped memory costs samples, not the host"""
    host = prog("misleading_cfi")
    alone = plain([host])
    profiled = sonde_run([host], db, args=["--sample", "1000"])
    same_behaviour(alone, profiled)
    profile_whole(db)
    notes = [m for (m,) in query(db, "SELECT message FROM notes WHERE topic = 'samples'")]
    assert any("abandoned" in n for n in notes), notes
