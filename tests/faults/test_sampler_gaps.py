"""The sampler's gaps (issue 16 item 3): threads that never make an intercepted call (a
library's worker pool, started before sonde's constructor or after it) are sampled under their
own thread's root, and the samples reach the exports, marked as sampled."""
from conftest import calls, plain, preloaded, prog, profile_whole, query, same_behaviour

POOL = prog("pool_spin")


def per_thread(db):
    """(thread seq, path, leaf) -> samples."""
    rows = query(db, "SELECT t.seq, s.path, s.leaf, SUM(s.count) FROM sampled_paths s "
                     "JOIN threads t USING (thread_id) GROUP BY t.seq, s.path, s.leaf")
    return {(seq, path, leaf): n for seq, path, leaf, n in rows}


def test_pool_threads_sampled_under_their_root(db, tmp_path):
    """sampler: a spinning worker and OpenBLAS's pool, which intercept nothing, are sampled"""
    env = {"OPENBLAS_NUM_THREADS": "2"}
    alone = plain([POOL], env_extra=env)
    off = str(tmp_path / "off.db")
    without = preloaded([POOL], off, env_extra=env)
    profiled = preloaded([POOL], db, env_extra={**env, "SONDE_SAMPLE_HZ": "1000"})
    same_behaviour(alone, without)
    same_behaviour(alone, profiled)
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == calls(off, "cblas_sgemm") == 100
    got = per_thread(db)
    main_seq = query(db, "SELECT MIN(seq) FROM threads")[0][0]
    # The worker's 0.3 s of CPU at 1 kHz: about 300 samples, all at its thread's root ('').
    spin = {k: n for k, n in got.items() if k[2].startswith("spin_only_loop")}
    assert len(spin) == 1, got
    (seq, path, _), n = next(iter(spin.items()))
    assert seq != main_seq and path == "" and 150 <= n <= 600, got
    # OpenBLAS's pool thread (started by its constructor, before sonde's): its kernels, at its
    # root, on a thread that is neither main nor the worker.
    pool = sum(n for (s, p, leaf), n in got.items()
               if s not in (main_seq, seq) and p == "" and "libopenblas" in leaf)
    assert pool >= 5, got
    # Recorded as idle threads: no exact figure of theirs, so no denominator grows.
    busy = query(db, "SELECT busy_threads FROM run_totals")[0][0]
    assert busy == query(off, "SELECT busy_threads FROM run_totals")[0][0], busy
