"""The bytes of MPI calls whose send arguments do not say them (mpi_bytes): the v-variants and
all-to-alls with MPI_IN_PLACE (0 bytes until 2026-12-06), a blocking receive into a buffer
larger than its message (what arrived, from its status, even under MPI_STATUS_IGNORE), a
nonblocking one (the buffer it posted), and persistent requests started by a thread other than
the one that made them (0 bytes on no communicator until then)."""
import shutil

import pytest

from conftest import BIN, CLI, LIB, query
from test_mpi import mpirun

MPIRUN = shutil.which("mpirun")
PROG = BIN / "mpi_bytes"
pytestmark = pytest.mark.skipif(MPIRUN is None or not PROG.exists(),
                                reason="no mpirun, or sonde built without MPI headers")


def rows(db):
    """{op: [(comm_size, bytes, calls), ...]} from comm_ops."""
    out = {}
    for op, size, nbytes, calls in query(db, "SELECT op, comm_size, bytes, SUM(calls) FROM comm_ops "
                                             "GROUP BY op, comm_size, bytes ORDER BY bytes"):
        out.setdefault(op, []).append((size, nbytes, calls))
    return out


@pytest.mark.parametrize("np", [2, 3])
def test_bytes_in_place_received_and_started_elsewhere(tmp_path, np):
    plain = mpirun(np, [PROG])
    assert plain.returncode == 0, plain.stderr
    r = mpirun(np, [CLI, "run", "-o", tmp_path / "prof.db", "--", PROG], SONDE_LIBRARY=LIB)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout and "rank 1 received 80 bytes" in r.stdout
    for rank in range(np):
        got = rows(tmp_path / f"prof.rank{rank}.db")
        block = 800 * (rank + 1)  # this rank's entry of the counts: 100 (rank + 1) doubles
        assert got["MPI_Allgatherv"] == [(np, block, 1)]
        assert got["MPI_Gatherv"] == [(np, block, 1)]   # the root's in place, the others' sent
        assert got["MPI_Scatterv"] == [(np, block, 1)]  # the root's in place, the others' received
        assert got["MPI_Alltoallv"] == [(np, 10 * 8 * np, 1)]
        assert got["MPI_Alltoall"] == [(np, 5 * 4 * np, 1)]
        # Both persistent requests (50 doubles each way), started by the worker thread.
        assert got["MPI_Startall"] == [(np, 2 * 50 * 8, 1)]
        if rank == 0:
            assert got["MPI_Send"] == [(np, 80, 3)]
        if rank == 1:
            # What arrived: 80 bytes each, with or without the program's status.
            assert got["MPI_Recv"] == [(np, 80, 2)]
            # The nonblocking receive: the buffer posted, the most it could receive.
            assert got["MPI_Irecv"] == [(np, 800000, 1)]
