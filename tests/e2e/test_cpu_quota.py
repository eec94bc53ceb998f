"""A CPU quota on the program's cgroup (a container's --cpus, a Kubernetes pod's CPU limit),
set for the test on this machine's own cgroup hierarchy (root only; skipped where no cgroup
with a quota can be made): libsonde records the quota and what it throttled, and the advice
holds the threads to it. The host's CPUs, which the mask still names, are no measure there."""
import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from conftest import CLI, clean_env, query, sonde_json, sonde_out

MLP = os.environ.get("SONDE_MLP", "")


def make_cgroup(quota_us, period_us):
    """A fresh cgroup limited to quota/period CPUs: (its folder, the file a pid is written to
    to enter it), or None where this machine has no writable cpu controller."""
    name = f"sonde-test-{uuid.uuid4().hex[:8]}"
    v1 = Path("/sys/fs/cgroup/cpu")
    v2 = Path("/sys/fs/cgroup")
    try:
        if (v1 / "cpu.cfs_quota_us").exists():
            d = v1 / name
            d.mkdir()
            (d / "cpu.cfs_period_us").write_text(str(period_us))
            (d / "cpu.cfs_quota_us").write_text(str(quota_us))
            return d
        if "cpu" in (v2 / "cgroup.subtree_control").read_text().split():
            d = v2 / name
            d.mkdir()
            (d / "cpu.max").write_text(f"{quota_us} {period_us}")
            return d
    except OSError:
        pass
    return None


def quota_cgroup(quota_us, period_us):
    d = make_cgroup(quota_us, period_us)
    if d is None:
        pytest.skip("no writable cgroup cpu controller here (root on a cgroup v1 cpu hierarchy "
                    "or a v2 one delegating cpu)")
    try:
        yield d
    finally:
        for _ in range(50):  # its processes have ended: the folder can go
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@pytest.fixture
def half_a_cpu():
    yield from quota_cgroup(50000, 100000)


@pytest.fixture
def one_cpu():
    yield from quota_cgroup(100000, 100000)


def in_cgroup(cgroup, *command):
    """The command run inside the cgroup: every process it starts is under its quota."""
    return ["sh", "-c", f'echo $$ > {cgroup / "cgroup.procs"} && exec "$@"', "sh", *command]


def test_a_cpu_quota_is_recorded_and_holds_the_thread_advice(tmp_path, half_a_cpu):
    db = tmp_path / "q.db"
    # Into the cgroup first, then sonde run: every process of the run is under the quota.
    r = subprocess.run(in_cgroup(half_a_cpu, CLI, "run", "-o", str(db), "--", MLP, "--steps", "20"),
                       env=clean_env(OPENBLAS_NUM_THREADS=2), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    info = dict(query(db, "SELECT key, value FROM run_info WHERE key LIKE 'cpu.%'"))
    assert info["cpu.quota"] == "0.500", info
    # 2 OpenBLAS threads and the main one on half a CPU: most periods end throttled.
    assert int(info["cpu.periods"]) > 0 and int(info["cpu.throttled_periods"]) > 0, info
    assert float(info["cpu.throttled_s"]) > 0, info
    header = sonde_out("report", db).splitlines()[1]
    assert "; CPU quota 0.500 cores (cgroup), throttled " in header, header
    cands = {c["rule"]: c for c in sonde_json("candidates", db)["candidates"]}
    contended = cands.get("threads-contended")
    assert contended is not None, list(cands)
    assert contended["evidence"]["cpu_quota"] == 0.5
    assert contended["evidence"]["throttled_s"] > 0
    assert "OPENBLAS_NUM_THREADS=1" in contended["advice"], contended["advice"]
    assert "torch" not in contended["advice"]
    # No rule asks for the host's cores: the quota's one whole core is all there is.
    assert "blas-threads" not in cands, cands.get("blas-threads")


def test_tune_sets_the_threads_the_quota_holds(tmp_path, one_cpu):
    """sonde tune under a quota of one CPU: the thread stages set the quota's one core, not the
    CPUs of the mask (a pod of 4 CPUs on a 64-core node had its blas-threads stage run 64)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: the quota binds nothing the mask does not")
    out = tmp_path / "tune"
    r = subprocess.run(in_cgroup(one_cpu, CLI, "tune", "-o", str(out), "--format", "json",
                                 "--repeat", "1", "--stages", "blas-threads", "--", MLP,
                                 "--steps", "10", "--eval-every", "10"),
                       env=clean_env(OPENBLAS_NUM_THREADS=1), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["cores"] == 1, j
    stage = next(s for s in j["stages"] if s["name"] == "blas-threads")
    assert stage["status"] == "skipped" and stage["reason"] == "one core", stage
    mask = len(os.sched_getaffinity(0))
    assert (f"the cgroup's CPU quota (1.00 cores) holds the thread stages to 1 of the {mask} "
            "CPUs the process may run on") in j["notes"], j["notes"]


def test_no_quota_records_none(tmp_path):
    # This machine's own cgroup has none (the test runs outside any made for it).
    db = tmp_path / "n.db"
    r = subprocess.run([CLI, "run", "-o", str(db), "--", MLP, "--steps", "2"], env=clean_env(),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    own = subprocess.run(["cat", "/proc/self/cgroup"], capture_output=True, text=True).stdout
    quota = query(db, "SELECT value FROM run_info WHERE key = 'cpu.quota'")
    if quota:  # a CI machine inside a container with a limit: then it is that limit
        pytest.skip(f"this machine's cgroup has a quota ({quota}; {own.strip()})")
    assert quota == []
