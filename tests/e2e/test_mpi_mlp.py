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


def test_cpp_on_1_2_4_ranks_merged_ranked_and_scaled(tmp_path):
    """The issue's done-when on the reference workload itself: mlp_train_mpi under sonde run on
    1, 2 and 4 ranks (the same global batch: strong scaling), each run's rank files merged, sonde
    ranks on the merged 4-rank file, and sonde scaling over the three merged files, whose figures
    must be the ones the merged files' own views hold."""
    steps, merged = 12, {}
    for np in (1, 2, 4):
        d = tmp_path / f"np{np}"
        d.mkdir()
        mpirun(np, [CLI, "run", "-o", d / "prof.db", "--", MLP_MPI] + ARGS, SONDE_LIBRARY=LIB)
        assert sorted(p.name for p in d.iterdir()) == [f"prof.rank{r}.db" for r in range(np)]
        merged[np] = tmp_path / f"run{np}.db"
        r = subprocess.run([CLI, "merge", "-o", merged[np], d], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert query(merged[np], "SELECT rank, world_size FROM processes ORDER BY rank") == \
            [(r, np) for r in range(np)]

    r = subprocess.run([CLI, "ranks", merged[4], "--format", "json", "-n", "0"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ranks = json.loads(r.stdout)
    assert ranks["ranks"] == 4
    # Each rank all-reduces every parameter array's gradient once per step, on 4 ranks (two
    # arrays of one size share a row).
    per_size = {}
    for b in grad_bytes():
        per_size[b] = per_size.get(b, 0) + steps * 4
    got = {b["message_bytes"]: (b["calls"], b["ranks"]) for b in ranks["bandwidth"]
           if b["op"] == "MPI_Allreduce" and b["message_bytes"] in per_size}
    assert got == {size: (calls, 4) for size, calls in per_size.items()}
    assert all(row["comm_s"] > 0 for row in ranks["per_rank"])

    r = subprocess.run([CLI, "scaling", merged[1], merged[4], merged[2], "--format", "json",
                        "-n", "0"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    scaling = json.loads(r.stdout)
    assert scaling["mode"] == "strong"
    runs = {row["ranks"]: row for row in scaling["runs"]}
    assert sorted(runs) == [1, 2, 4]
    ref = runs[1]  # the fewest workers: every rank has the same BLAS threads
    for np, row in runs.items():
        threads, time_s = query(merged[np], "SELECT threads, time_s FROM run_scale")[0]
        assert (row["threads"], row["workers"]) == (threads, np * threads)
        assert row["time_s"] == pytest.approx(time_s)
        assert row["efficiency_pct"] == pytest.approx(
            100 * ref["time_s"] * ref["workers"] / (row["workers"] * row["time_s"]), rel=1e-6)
