"""Denominators that mean something: threads that never make a measured call (a BLAS worker
pool) are not recorded, so they cannot dilute the run's percentages."""
import json
import subprocess

import pytest

from conftest import CLI, calls, clean_env, plain, preloaded, prog, profile_whole, query, \
    same_behaviour


def report(db):
    r = subprocess.run([CLI, "report", str(db), "--top", "0", "--format", "json"],
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)



def test_idle_worker_pool_is_in_no_denominator(db):
    """idle worker pool beside one busy thread: pool not recorded, %Time of the busy thread"""
    cmd = [prog("idle_pool"), 3]
    same_behaviour(plain(cmd), preloaded(cmd, db))
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 1000
    # Registered at their start, the three waiting workers made a 4x "total" (each lived as
    # long as main) and cut every share to a quarter.
    assert query(db, "SELECT COUNT(*) FROM threads") == [(1,)]
    r = report(db)
    assert (r["run"]["threads"], r["run"]["idle_threads"]) == (1, 0)
    # The busy thread spans the process but for sonde's start-up before it and the exit after.
    assert 0.8 <= r["total_s"] / r["wall_s"] <= 1.0, (r["total_s"], r["wall_s"])
    root = next(row for row in r["rows"] if row["kind"] == "root")
    assert root["pct_time"] == pytest.approx(100.0, abs=1e-9)  # a ratio of sums of doubles
