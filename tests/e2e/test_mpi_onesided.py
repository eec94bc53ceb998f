"""Persistent requests and one-sided communication under sonde (mpi_onesided): exact calls and
bytes per rank, the bytes of MPI_Start and MPI_Startall taken from the requests' init calls, the
window's group size on MPI_Put/Get/Accumulate and the fences, one-sided operations in flight
during the compute between the fences (overlapped time), and the program's output unchanged."""
import shutil
import subprocess

import pytest

from conftest import BIN, CLI, LIB, query
from test_mpi import mpirun, ops

MPIRUN = shutil.which("mpirun")
PROG = BIN / "mpi_onesided"
pytestmark = pytest.mark.skipif(MPIRUN is None or not PROG.exists(),
                                reason="no mpirun, or sonde built without MPI headers")
STEPS, COMPUTE_MS = 3, 20


def run(tmp_path, np, *args):
    plain = mpirun(np, [PROG, "--steps", STEPS, "--compute-ms", COMPUTE_MS, *args])
    assert plain.returncode == 0, plain.stderr
    r = mpirun(np, [CLI, "run", "-o", tmp_path / "prof.db", "--", PROG, "--steps", STEPS,
                    "--compute-ms", COMPUTE_MS, *args], SONDE_LIBRARY=LIB)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout and "checksum" in r.stdout
    return [tmp_path / f"prof.rank{k}.db" for k in range(np)]


@pytest.mark.parametrize("np", [2, 4])
def test_persistent_and_one_sided_calls_and_bytes(tmp_path, np):
    for db in run(tmp_path, np):
        got = ops(db)
        for setup in ("MPI_Init", "MPI_Comm_rank", "MPI_Comm_size", "MPI_Finalize"):
            got.pop(setup)
        assert got == {
            # Made once: no bytes of their own; each start moves what they describe.
            "MPI_Recv_init": ("setup", 1, np, 0, 1),
            "MPI_Send_init": ("setup", 1, np, 0, 1),
            # Both requests: 50 doubles received and 50 sent (as MPI_Irecv + MPI_Isend).
            "MPI_Startall": ("p2p", 0, np, 2 * 50 * 8, STEPS),
            "MPI_Waitall": ("wait", 1, 0, 0, STEPS),
            "MPI_Request_free": ("setup", 1, 0, 0, 2),
            "MPI_Win_allocate": ("setup", 1, np, 0, 1),
            "MPI_Put": ("rma", 0, np, 25 * 4, STEPS),
            "MPI_Get": ("rma", 0, np, 10 * 8, STEPS),
            "MPI_Accumulate": ("rma", 0, np, 4 * 4, STEPS),
            "MPI_Win_fence": ("wait", 1, np, 0, 2 * STEPS),
            "MPI_Win_lock": ("wait", 1, np, 0, STEPS),
            "MPI_Win_unlock": ("wait", 1, np, 0, STEPS),
            "MPI_Win_free": ("setup", 1, 0, 0, 1),
            "MPI_Barrier": ("collective", 1, np, 0, 2),
            "MPI_Reduce": ("collective", 1, np, 8, 1),
        }


def test_start_one_request_at_a_time(tmp_path):
    for db in run(tmp_path, 2, "--start"):
        got = ops(db)
        assert got["MPI_Start"] == ("p2p", 0, 2, 50 * 8, 2 * STEPS)
        assert "MPI_Startall" not in got


def test_one_sided_operations_overlap_the_compute_between_fences(tmp_path):
    """MPI_Put and MPI_Get are in flight from their call to the closing fence: the compute
    between them (COMPUTE_MS of wall time, outside any MPI call) is overlapped time; the fences
    and the unlock, where they complete, are exposed."""
    for db in run(tmp_path, 2):
        ((exposed, overlapped),) = query(db, "SELECT exposed_ns, overlapped_ns FROM comm_overlap")
        assert overlapped >= 0.95 * STEPS * COMPUTE_MS * 1e6
        assert exposed > 0
        rma = query(db, "SELECT SUM(calls) FROM comm_ops WHERE kind = 'rma'")[0][0]
        assert rma == 3 * STEPS
    p = subprocess.run([CLI, "merge", "-o", str(tmp_path / "run.db"), str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = query(tmp_path / "run.db", "SELECT op, ranks, calls, bytes, gbs FROM comm_bandwidth "
                                      "WHERE kind = 'rma' ORDER BY op")
    assert rows == [("MPI_Accumulate", 2, 2 * STEPS, 16 * 2 * STEPS, None),
                    ("MPI_Get", 2, 2 * STEPS, 80 * 2 * STEPS, None),
                    ("MPI_Put", 2, 2 * STEPS, 100 * 2 * STEPS, None)]


def test_window_keeps_the_set_up_it_did_not_measure(tmp_path):
    """mpirun -np 2 sonde run --steps 1: the persistent requests and the window are made before
    the collection window opens (not measured), yet steps 2 and 3 record their bytes and the
    window's group size (before: MPI_Startall 0 bytes on 0 ranks, the RMA calls 0 ranks)."""
    steps = 3
    r = mpirun(2, [CLI, "run", "-o", tmp_path / "prof.db", "--steps", 1, "--", PROG, "--steps",
                   steps, "--compute-ms", 1, "--regions"], SONDE_LIBRARY=LIB)
    assert r.returncode == 0, r.stderr
    for rank in range(2):
        got = ops(tmp_path / f"prof.rank{rank}.db")
        got = {op: v for op, v in got.items() if op not in ("MPI_Finalize", "MPI_Reduce",
                                                             "MPI_Barrier", "MPI_Request_free",
                                                             "MPI_Win_free")}
        n = steps - 1
        assert got == {
            "MPI_Startall": ("p2p", 0, 2, 2 * 50 * 8, n),
            "MPI_Waitall": ("wait", 1, 0, 0, n),
            "MPI_Put": ("rma", 0, 2, 25 * 4, n),
            "MPI_Get": ("rma", 0, 2, 10 * 8, n),
            "MPI_Accumulate": ("rma", 0, 2, 4 * 4, n),
            "MPI_Win_fence": ("wait", 1, 2, 0, 2 * n),
            "MPI_Win_lock": ("wait", 1, 2, 0, n),
            "MPI_Win_unlock": ("wait", 1, 2, 0, n),
        }, got
