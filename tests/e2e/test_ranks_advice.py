"""sonde candidates on a real 2-rank mpirun (issue 33): programs/rank_steps.py, numpy GEMMs on
a 1-thread BLAS in a step loop with an MPI_Allreduce a step, rank 1 doing three times rank 0's
work. Ranks unbound (--bind-to none), as torchrun starts them: each may run on every core."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CLI, clean_env, query

PY = "/usr/bin/python3"
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
PROG = Path(__file__).parent / "programs" / "rank_steps.py"
MPIRUN = shutil.which("mpirun")
NP = 2


def have_mpi4py():
    return subprocess.run([PY, "-c", "import mpi4py, numpy"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(MPIRUN is None or not have_mpi4py(),
                                reason="no mpirun, or no mpi4py for /usr/bin/python3")


def candidates(db):
    r = subprocess.run([CLI, "candidates", str(db), "--format", "json", "-n", "0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["candidates"]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rank_advice")
    d = tmp / "ranks"
    d.mkdir()
    cmd = [MPIRUN, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", NP,
           PY, "-m", "sonde", "-o", d / "prof.db", PROG, 10]
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300,
                       env=clean_env(PYTHONPATH=PYTHONPATH, OPENBLAS_NUM_THREADS=1), cwd=tmp)
    assert p.returncode == 0, p.stderr
    merged = tmp / "run.db"
    m = subprocess.run([CLI, "merge", "-o", str(merged), str(d)], capture_output=True, text=True,
                       timeout=120)
    assert m.returncode == 0, m.stderr
    return {"merged": merged, "rank0": d / "prof.rank0.db"}


def test_blas_threads_counts_the_ranks_sharing_the_host(ranks):
    """Two ranks on this host's cores, each BLAS on 1 thread: raising either to every core
    would oversubscribe them. Advice is per rank: cores / ranks on the host."""
    cores, = query(ranks["merged"], "SELECT COALESCE(affinity_cores, cores) FROM runs")[0]
    hosts = query(ranks["merged"], "SELECT host, COUNT(*) FROM rank_times GROUP BY host")
    assert len(hosts) == 1 and hosts[0][1] == NP, hosts
    per_rank = max(1, cores // NP)
    # The rank's own file knows its host's ranks from the launcher (OMPI_COMM_WORLD_LOCAL_SIZE).
    for db in (ranks["merged"], ranks["rank0"]):
        found = [c for c in candidates(db) if c["rule"] in ("blas-threads", "framework-threads")]
        for c in found:
            assert c["evidence"]["cores"] == per_rank, c
            assert c["evidence"]["ranks_on_host"] == NP, c
            assert f"all {cores} cores" not in c["advice"] or cores == per_rank, c
        if per_rank == 1:  # 1-thread BLAS already uses a rank's share: nothing to advise
            assert found == [], found


def test_one_imbalance_is_one_candidate(ranks):
    """step() only calls compute(), whose time is its GEMMs: rank 1's extra GEMMs are one
    imbalance, named once, at the deepest frame of the chain (cblas_dgemm, the work that
    differs), with compute() and step() as the callers it shows in.

    The times are wall times: descheduled inside a caller's own code (ctest -j2 on 2 cores),
    the slow rank's caller holds more than its GEMMs' lost time, and the rule names the caller.
    So the GEMMs are few and large (1 against 3 of 768 x 768 a step): with 256 x 256 and 4
    against 12, 5 runs of 30 beside test_torch_ops named compute() or <module>."""
    found = [c for c in candidates(ranks["merged"]) if c["rule"] == "rank-imbalance"]
    names = [c["location"].rsplit(" [", 1)[0] for c in found]  # less the " [kind]"
    assert not any(n.endswith(("(compute)", "(step)", "(<module>)")) for n in names), names
    (gemm,) = found
    assert gemm["location"].startswith("cblas_dgemm"), names
    assert gemm["evidence"]["slowest_rank"] == 1
    callers = gemm["evidence"]["same_imbalance_in"]
    assert "(compute)" in callers and "(step)" in callers, gemm
