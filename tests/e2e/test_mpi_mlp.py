"""The data-parallel reference workloads (examples/mlp_cpp mlp_train_mpi, examples/mlp_numpy
train_mpi.py): the same printed loss and accuracy as the single-process run for the same global
batch, and under sonde the gradient all-reduces counted per rank, the nonblocking variant's
overlap, and t_comm filled in the iteration breakdown."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CLI, LIB, MLP, clean_env, query

MPIRUN = shutil.which("mpirun")
MLP_MPI = Path(MLP).parent / "mlp_train_mpi" if MLP else None
NUMPY_DIR = Path(os.environ.get("SONDE_SOURCE", ".")) / "examples" / "mlp_numpy"
ARGS = ["--steps", "12", "--eval-every", "4", "--hidden", "200"]
HIDDEN = 200
pytestmark = pytest.mark.skipif(MPIRUN is None or MLP_MPI is None or not MLP_MPI.exists(),
                                reason="no mpirun, or mlp_train_mpi not built")


def mpirun(np, cmd, **env):
    args = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", str(np)]
    r = subprocess.run(args + [str(c) for c in cmd], env=clean_env(**env), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def single(cmd):
    r = subprocess.run([str(c) for c in cmd], env=clean_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("np,overlap", [(2, False), (4, False), (2, True), (4, True)])
def test_cpp_same_loss_and_accuracy_as_one_process(np, overlap):
    """mlp_train_mpi on 2 and 4 ranks, blocking and --overlap: stdout identical to mlp_train."""
    expected = single([MLP] + ARGS)
    assert "final loss" in expected
    got = mpirun(np, [MLP_MPI] + ARGS + (["--overlap"] if overlap else [])).stdout
    assert got == expected


def test_numpy_same_loss_and_accuracy_as_one_process():
    """train_mpi.py (mpi4py) on 2 ranks: stdout identical to train.py."""
    pytest.importorskip("mpi4py")
    expected = single(["/usr/bin/python3", NUMPY_DIR / "train.py"] + ARGS)
    got = mpirun(2, ["/usr/bin/python3", NUMPY_DIR / "train_mpi.py"] + ARGS).stdout
    assert got == expected


def grad_bytes():
    """Bytes of each parameter array's gradient (float32): W and b of the three layers."""
    shapes = [(784, HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, 10)]
    return sorted([4 * i * o for i, o in shapes] + [4 * o for _, o in shapes])


@pytest.mark.parametrize("overlap", [False, True])
def test_cpp_under_sonde(tmp_path, overlap):
    """Per rank: one all-reduce per parameter array and step with its bytes (MPI_Allreduce, or
    MPI_Iallreduce with --overlap), overlap 0 when blocking and > 0 with --overlap, and t_comm
    in the iteration breakdown."""
    steps = 12
    out = tmp_path / "prof.db"
    mpirun(2, [CLI, "run", "-o", out, "--", MLP_MPI] + ARGS + (["--overlap"] if overlap else []),
           SONDE_LIBRARY=LIB)
    op = "MPI_Iallreduce" if overlap else "MPI_Allreduce"
    for rank in range(2):
        db = tmp_path / f"prof.rank{rank}.db"
        rows = query(db, "SELECT bytes, SUM(calls) FROM comm_ops WHERE op = ? AND comm_size = 2 "
                         "GROUP BY bytes ORDER BY bytes", (op,))
        per_step = {}
        for b in grad_bytes():
            per_step[b] = per_step.get(b, 0) + steps
        if not overlap:  # the loss/accuracy sums: 3 windows and the test set, 2 doubles each
            per_step[16] = per_step.get(16, 0) + 3 + 1
        assert dict(rows) == per_step
        overlapped, = query(db, "SELECT overlapped_ns FROM comm_overlap")[0]
        assert (overlapped > 0) == overlap
        r = subprocess.run([CLI, "metrics", db, "--section", "breakdown", "--format", "json"],
                           capture_output=True, text=True, env=clean_env())
        assert r.returncode == 0, r.stderr
        phases = {p["phase"]: p for p in json.loads(r.stdout)["breakdown"]["phases"]}
        assert phases["t_comm"]["time_s"] > 0
