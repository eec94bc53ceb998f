"""MPI under sonde: one file per rank with its rank, size and host; exact MPI call counts and
bytes per rank (comm_ops); exposed and overlapped communication (comm_overlap); mpi4py programs
seen through the same C library; programs without MPI unaffected. mpirun oversubscribes this
machine's cores, so every run is a few short steps."""
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import BIN, CLI, LIB, clean_env, query, routine_calls

MPIRUN = shutil.which("mpirun")
PROG = BIN / "mpi_calls"
pytestmark = pytest.mark.skipif(MPIRUN is None or not PROG.exists(),
                                reason="no mpirun, or sonde built without MPI headers")


def mpirun(np, cmd, timeout=120, **env):
    e = clean_env(**env)
    args = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", str(np)] + [str(c) for c in cmd]
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=timeout)


def sonde_run(tmp_path, np, *prog_args):
    out = tmp_path / "prof.db"
    r = mpirun(np, [CLI, "run", "-o", out, "--", PROG, *prog_args], SONDE_LIBRARY=LIB)
    assert r.returncode == 0, r.stderr
    return r


def ops(db):
    """comm_ops summed per operation: {op: (kind, blocking, comm_size, bytes, calls)}."""
    rows = query(db, "SELECT op, kind, blocking, comm_size, bytes, SUM(calls) FROM comm_ops "
                     "GROUP BY op, kind, blocking, comm_size, bytes")
    out = {}
    for op, kind, blocking, size, nbytes, calls in rows:
        assert op not in out, f"{op} recorded with two sizes: {out[op]} and {rows}"
        out[op] = (kind, blocking, size, nbytes, calls)
    return out


@pytest.mark.parametrize("np", [1, 2, 4])
def test_one_file_per_rank_with_exact_calls_and_bytes(tmp_path, np):
    """mpirun -np N sonde run: prof.rank<R>.db per rank, each with rank, size, host, local rank,
    and the program's MPI calls counted exactly with their bytes (count x datatype size)."""
    steps = 3
    r = sonde_run(tmp_path, np, "--steps", steps, "--compute-ms", 1)
    files = sorted(p.name for p in tmp_path.glob("*.db"))
    assert files == [f"prof.rank{k}.db" for k in range(np)], files
    uuids = set()
    for rank in range(np):
        db = tmp_path / f"prof.rank{rank}.db"
        assert f"profile written to {db}" in r.stderr
        proc = query(db, "SELECT rank, world_size, local_rank, host, end_reason FROM processes "
                         "WHERE rank IS NOT NULL")
        assert proc == [(rank, np, rank, socket.gethostname(), "exit")]
        uuids.add(query(db, "SELECT uuid FROM runs")[0][0])
        got = ops(db)
        expected = {
            "MPI_Init": ("setup", 1, 0, 0, 1),
            "MPI_Comm_rank": ("setup", 1, np, 0, 1),
            "MPI_Comm_size": ("setup", 1, np, 0, 1),
            "MPI_Allreduce": ("collective", 1, np, 1000 * 4, steps),
            "MPI_Bcast": ("collective", 1, np, 10 * 8, steps),
            "MPI_Irecv": ("p2p", 0, np, 100 * 4, steps),
            "MPI_Isend": ("p2p", 0, np, 100 * 4, steps),
            "MPI_Waitall": ("wait", 1, 0, 0, steps),
            "MPI_Barrier": ("collective", 1, np, 0, steps),
            "MPI_Finalize": ("setup", 1, 0, 0, 1),
        }
        assert got == expected
        # The same calls in the calling-context tree.
        assert routine_calls(db, "MPI_Allreduce") == steps
        assert routine_calls(db, "MPI_Isend") == steps
    assert len(uuids) == 1, "ranks of one job share a run id"


def test_overlap_blocking_against_nonblocking(tmp_path):
    """Blocking exchange: nothing in flight, so no overlap; Isend/Irecv with compute before the
    Waitall: overlapped time at least the compute the program did while they were in flight."""
    steps, compute_ms = 4, 20
    (tmp_path / "b").mkdir()
    (tmp_path / "n").mkdir()
    sonde_run(tmp_path / "b", 2, "--steps", steps, "--compute-ms", compute_ms, "--blocking")
    sonde_run(tmp_path / "n", 2, "--steps", steps, "--compute-ms", compute_ms)
    for rank in range(2):
        exposed, overlapped, inflight = query(
            tmp_path / "b" / f"prof.rank{rank}.db",
            "SELECT exposed_ns, overlapped_ns, inflight_ns FROM comm_overlap")[0]
        assert exposed > 0 and overlapped == 0 and inflight == 0
        assert ops(tmp_path / "b" / f"prof.rank{rank}.db")["MPI_Sendrecv"] == (
            "p2p", 1, 2, 400, steps)
        exposed, overlapped, inflight = query(
            tmp_path / "n" / f"prof.rank{rank}.db",
            "SELECT exposed_ns, overlapped_ns, inflight_ns FROM comm_overlap")[0]
        assert overlapped >= 0.9 * steps * compute_ms * 1e6, overlapped
        assert inflight >= overlapped


def test_preloaded_launcher_gives_ranks_their_own_files(tmp_path):
    """LD_PRELOAD on mpirun itself: mpirun writes prof.db, each rank its own prof.rank<R>.db
    (never the launcher's file), all with one run id."""
    db = tmp_path / "prof.db"
    r = mpirun(2, [PROG, "--steps", 2, "--compute-ms", 1], LD_PRELOAD=LIB, SONDE_OUTPUT=db)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [
        "prof.db", "prof.rank0.db", "prof.rank1.db"]
    assert query(db, "SELECT COUNT(*) FROM processes WHERE rank IS NOT NULL") == [(0,)]
    assert query(db, "SELECT COUNT(*) FROM comm_ops") == [(0,)]
    run_id = query(db, "SELECT uuid FROM runs")
    for rank in range(2):
        rdb = tmp_path / f"prof.rank{rank}.db"
        assert query(rdb, "SELECT uuid FROM runs") == run_id
        assert query(rdb, "SELECT rank, world_size FROM processes WHERE rank IS NOT NULL") == [
            (rank, 2)]
        assert ops(rdb)["MPI_Allreduce"][4] == 2


def mpi4py_run(tmp_path, name, text):
    """The mpi4py script `text` on 2 ranks under sonde run: prof.rank<R>.db in tmp_path."""
    pytest.importorskip("mpi4py")
    script = tmp_path / name
    script.write_text(text)
    r = mpirun(2, [CLI, "run", "-o", tmp_path / "prof.db", "--", "/usr/bin/python3", script],
               SONDE_LIBRARY=LIB)
    assert r.returncode == 0, r.stderr
    return r


def test_mpi4py_calls_are_seen(tmp_path):
    """mpi4py goes through the same C library: its Allreduce of a numpy buffer and its pickled
    allreduce appear as MPI calls with their bytes, under the Python frames of the script."""
    mpi4py_run(tmp_path, "allreduce.py",
        "import numpy as np\n"
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "x = np.full(1000, comm.Get_rank(), dtype=np.float64)\n"
        "y = np.empty_like(x)\n"
        "def step():\n"
        "    comm.Allreduce(x, y, op=MPI.SUM)\n"
        "for _ in range(3):\n"
        "    step()\n"
        "print(comm.Get_rank(), y[0])\n")
    for rank in range(2):
        db = tmp_path / f"prof.rank{rank}.db"
        rows = query(db, "SELECT bytes, SUM(calls), comm_size FROM comm_ops "
                         "WHERE op = 'MPI_Allreduce' GROUP BY bytes, comm_size")
        assert rows == [(8000, 3, 2)]
        assert query(db, "SELECT rank FROM processes WHERE rank IS NOT NULL") == [(rank,)]
        # A program that never imported torch lost no torch.distributed collective: sonde
        # ranks told every mpi4py run it had, until 2026-12-06.
        r = subprocess.run([CLI, "ranks", db], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and "MPI_Allreduce" in r.stdout, r.stderr
        assert "torch" not in r.stdout, r.stdout


@pytest.mark.parametrize("post,poll,receive", [
    ("r = comm.Irecv(b, source=0, tag=it)", "r.Test()", "r.Wait()"),
    ("pass", "comm.Iprobe(source=0, tag=it)", "comm.Recv(b, source=0, tag=it)")])
def test_a_rank_spinning_on_a_poll_waits_exposed(tmp_path, post, poll, receive):
    """Rank 1 spins on a test (or a probe) while rank 0 sleeps before each send: the loop
    between the polls is waiting, exposed, not computation overlapping the receive (a red
    team's rank spinning 0.9 s read 57 % of its communication overlapped). On a loaded host the
    spinning rank is taken off its core between polls for milliseconds: those gaps, no CPU time
    spent in them, are waiting too (a CI run read 0.149 s of 0.6 overlapped). Judged against the
    wait the program measured itself: a rank started late waits less for the first send."""
    r = mpi4py_run(tmp_path, "spin.py",
        "import time\n"
        "import numpy as np\n"
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "waited = 0.0\n"
        "for it in range(3):\n"
        "    if comm.Get_rank() == 0:\n"
        "        time.sleep(0.2)\n"
        "        comm.Send(np.ones(10), dest=1, tag=it)\n"
        "    else:\n"
        "        b = np.empty(10)\n"
        f"        {post}\n"
        "        t = time.perf_counter()\n"
        f"        while not {poll}:\n"
        "            pass\n"
        "        waited += time.perf_counter() - t\n"
        f"        {receive}\n"
        "if comm.Get_rank() == 1:\n"
        "    print(f'waited {waited:.6f}')\n")
    exposed, overlapped = query(tmp_path / "prof.rank1.db",
                                "SELECT exposed_ns, overlapped_ns FROM comm_overlap")[0]
    waited = float(r.stdout.split("waited ")[1].split()[0]) * 1e9
    assert waited > 0.3e9, r.stdout  # of about 0.6 s: 3 sleeps of rank 0's
    assert overlapped < 0.05e9, (exposed, overlapped, waited)
    assert exposed > 0.9 * waited, (exposed, overlapped, waited)


def test_mpi4py_pickled_receive_is_seen_through_its_matched_probe(tmp_path):
    """mpi4py's pickled comm.recv() is MPI_Mprobe + MPI_Mrecv (mpi4py.rc.recv_mprobe): neither
    was intercepted, so a receiving rank's wait showed as its script's own time, with no bytes."""
    mpi4py_run(tmp_path, "pickled.py",
        "import time\n"
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "for i in range(3):\n"
        "    if comm.Get_rank() == 0:\n"
        "        time.sleep(0.05)\n"
        "        comm.send({'i': i, 'payload': 'x' * 100}, dest=1, tag=1)\n"
        "    else:\n"
        "        assert comm.recv(source=0, tag=1)['i'] == i\n"
        "        if comm.iprobe(source=0, tag=2): raise SystemExit('no tag-2 message was sent')\n")
    got = ops(tmp_path / "prof.rank1.db")
    assert got["MPI_Mprobe"][0] == "wait" and got["MPI_Mprobe"][4] == 3, got
    kind, blocking, _, nbytes, calls = got["MPI_Mrecv"]
    assert (kind, blocking, calls) == ("p2p", 1, 3) and nbytes > 100, got
    assert got["MPI_Iprobe"][0] == "wait" and got["MPI_Iprobe"][4] == 3, got
    # The wait is the probe's: most of rank 1's 0.15 s of waiting is inside MPI_Mprobe.
    [(exposed,)] = query(tmp_path / "prof.rank1.db", "SELECT SUM(exposed_ns) FROM comm_overlap")
    assert exposed > 0.08e9, exposed


def test_program_without_mpi_unaffected(tmp_path):
    """libsonde is not linked against libmpi, and a program without MPI runs as before: same
    output, no rank, no communication rows."""
    needed = subprocess.run(["readelf", "-d", LIB], capture_output=True, text=True).stdout
    assert "libmpi" not in needed
    plain = subprocess.run([BIN / "blas_threads", "2", "1000"], env=clean_env(),
                           capture_output=True, text=True)
    db = tmp_path / "prof.db"
    pre = subprocess.run([BIN / "blas_threads", "2", "1000"],
                         env=clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db),
                         capture_output=True, text=True)
    assert (pre.returncode, pre.stdout) == (plain.returncode, plain.stdout)
    assert query(db, "SELECT rank, world_size, local_rank FROM processes") == [(None, None, None)]
    assert query(db, "SELECT COUNT(*) FROM comm_ops") == [(0,)]
    assert query(db, "SELECT COUNT(*) FROM comm_overlap") == [(0,)]


def test_nccl_calls_join_comm_ops(tmp_path):
    """NCCL's calls (through the stub libraries, no GPU) are comm_ops rows too: kind, bytes as the
    nccl wrappers count them, one call each; a group's operations are one row of its end."""
    import test_gpu_wrappers as gpu
    if not gpu.PROGRAM.exists():
        pytest.skip("gpu_calls not built")
    db = tmp_path / "prof.db"
    r = gpu.run([gpu.PROGRAM], db, **gpu.NO_CUPTI)
    assert r.returncode == 0, r.stderr
    rows = query(db, "SELECT op, kind, blocking, bytes, calls FROM comm_ops ORDER BY op")
    # The two all-reduces inside a group only queue: their bytes are the outer ncclGroupEnd's row.
    assert sorted(rows) == sorted(
        [(op, "p2p" if op in ("ncclSend", "ncclRecv") else "collective", 1, nbytes, 1)
         for op, nbytes in gpu.NCCL_BYTES.items() if op != "ncclBroadcast"]
        # ncclBcast's ncclBroadcast, called from the NCCL library: a call site of its own.
        + [("ncclBroadcast", "collective", 1, 80, 1), ("ncclBroadcast", "collective", 1, 24, 1)] + [("ncclGroupEnd", "collective", 1, 4000, 1)])
    assert query(db, "SELECT COUNT(*) FROM comm_overlap") == [(0,)]


def test_rank_file_of_an_earlier_run_is_not_overwritten(tmp_path):
    """prof.rank0.db already there: rank 0 writes beside it (prof.rank0.<pid>.db), says so, and
    `sonde run` names the file it wrote."""
    old = tmp_path / "prof.rank0.db"
    old.write_bytes(b"an earlier run's file")
    r = sonde_run(tmp_path, 1, "--steps", 1, "--compute-ms", 1)
    assert old.read_bytes() == b"an earlier run's file"
    written = [p for p in tmp_path.glob("prof.rank0.*.db")]
    assert len(written) == 1, list(tmp_path.iterdir())
    assert f"profile written to {written[0]}" in r.stderr
    assert query(written[0], "SELECT rank, world_size FROM processes WHERE rank IS NOT NULL") == [
        (0, 1)]


def test_ranks_ignore_the_name_asked_for_and_force_replaces_their_own_files(tmp_path):
    """Ranks write prof.rank<R>.db: an unrelated prof.db made every rank refuse to start, and
    --force removed it but left the ranks' earlier files, the ranks writing beside them."""
    unrelated = tmp_path / "prof.db"
    unrelated.write_bytes(b"not a rank's")
    r = sonde_run(tmp_path, 2, "--steps", 1, "--compute-ms", 1)
    assert unrelated.read_bytes() == b"not a rank's"
    assert sorted(p.name for p in tmp_path.glob("prof.rank*.db")) == ["prof.rank0.db",
                                                                     "prof.rank1.db"], r.stderr
    first = [query(tmp_path / f"prof.rank{k}.db", "SELECT started_ns FROM processes") for k in (0, 1)]
    r = mpirun(2, [CLI, "run", "--force", "-o", tmp_path / "prof.db", "--", PROG, "--steps", 1],
               SONDE_LIBRARY=LIB)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.glob("prof.rank*.db")) == ["prof.rank0.db",
                                                                     "prof.rank1.db"], r.stderr
    again = [query(tmp_path / f"prof.rank{k}.db", "SELECT started_ns FROM processes") for k in (0, 1)]
    assert all(a != b for a, b in zip(first, again))  # the ranks' new files, in place
    assert unrelated.read_bytes() == b"not a rank's"


def test_mpi_call_before_init_fails_as_without_sonde(tmp_path):
    """MPI_Send before MPI_Init: Open MPI's own refusal naming MPI_Send, and the same exit status
    (sonde asking PMPI_Type_size first would make Open MPI name that instead)."""
    prog = BIN / "mpi_early"
    plain = subprocess.run([prog], env=clean_env(), capture_output=True, text=True, timeout=60)
    pre = subprocess.run([prog], env=clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=tmp_path / "p.db"),
                         capture_output=True, text=True, timeout=60)
    assert "The MPI_Send() function was called before MPI_INIT" in plain.stderr
    assert "The MPI_Send() function was called before MPI_INIT" in pre.stderr
    assert "MPI_Type_size" not in pre.stderr
    assert (pre.returncode, pre.stdout) == (plain.returncode, plain.stdout)


def test_launcher_environment_without_mpi(tmp_path):
    """A program started with a rank in its environment but no MPI (a helper under mpirun, a
    torchrun worker): its own rank file with the environment's rank; nonsense values: no rank."""
    db = tmp_path / "prof.db"
    env = dict(OMPI_COMM_WORLD_RANK=1, OMPI_COMM_WORLD_SIZE=2, OMPI_COMM_WORLD_LOCAL_RANK=0)
    r = subprocess.run([BIN / "blas_threads", "1", "10"],
                       env=clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, **env),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert query(tmp_path / "prof.rank1.db", "SELECT rank, world_size, local_rank FROM processes"
                 ) == [(1, 2, 0)]
    assert not db.exists()
    r = subprocess.run([BIN / "blas_threads", "1", "10"],
                       env=clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, RANK="x", WORLD_SIZE=2),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert query(db, "SELECT rank FROM processes") == [(None,)]


@pytest.mark.parametrize("kind", ["waitall", "wait", "waitany", "waitsome", "test", "testall",
                                  "testany", "testsome"])
def test_every_wait_and_test_ends_the_requests_in_flight(tmp_path, kind):
    """The exchange completed by each wait or test function: once it returns, nothing is in
    flight, so the 150 ms computed afterwards in each step is neither in flight nor overlapped
    (a request left on the books would add all of it). The bound is the window the program
    itself measured around each exchange, so a preempted compute (at load 16 one 5 ms window
    took 250 ms) stretches the bound with it."""
    steps, after_ms = 2, 150
    r = sonde_run(tmp_path, 2, "--steps", steps, "--compute-ms", 5, "--after-ms", after_ms,
                  "--complete", kind)
    window = {int(m[1]): float(m[2]) for m in
              re.finditer(r"^rank (\d+): exchange window ([0-9.]+) s$", r.stdout, re.M)}
    assert sorted(window) == [0, 1], r.stdout
    for rank in range(2):
        db = tmp_path / f"prof.rank{rank}.db"
        overlapped, inflight = query(db, "SELECT overlapped_ns, inflight_ns FROM comm_overlap")[0]
        # sonde's clock and the program's differ by their rates only (1 % is ample), and the
        # window is read outside the calls that bound it.
        bound = window[rank] * 1.01e9
        assert 0 < overlapped <= inflight <= bound, (overlapped, inflight, bound)
        op = "MPI_" + kind.capitalize()
        calls = query(db, "SELECT SUM(calls) FROM comm_ops WHERE op = ? AND kind = 'wait'", (op,))
        expected = {"waitall": steps, "wait": 2 * steps, "waitany": 2 * steps}
        assert calls[0][0] == expected.get(kind, calls[0][0]) and calls[0][0] >= steps


def test_more_requests_than_the_table_holds(tmp_path):
    """200 requests outstanding at once on one thread (the table holds 64): every call counted,
    the 136 that did not fit noted, and after the one MPI_Waitall nothing is left in flight."""
    sonde_run(tmp_path, 1, "--steps", 1, "--compute-ms", 1, "--burst", 100, "--after-ms", 300)
    db = tmp_path / "prof.rank0.db"
    for op, calls in (("MPI_Isend", {4: 100, 400: 1}), ("MPI_Irecv", {4: 100, 400: 1}),
                      ("MPI_Waitall", {0: 2})):
        assert dict(query(db, "SELECT bytes, SUM(calls) FROM comm_ops WHERE op = ? "
                              "GROUP BY bytes", (op,))) == calls
    notes = query(db, "SELECT message FROM notes WHERE topic = 'comm-untracked'")
    assert len(notes) == 1 and notes[0][0].startswith("136 nonblocking requests"), notes
    _, inflight = query(db, "SELECT overlapped_ns, inflight_ns FROM comm_overlap")[0]
    assert inflight < 150e6, inflight


def test_a_rank_killed_inside_an_mpi_call_reads_as_communicating(tmp_path):
    """A hung job killed by its time limit: rank 1 never reaches the second Allreduce, rank 0
    waits in it until mpirun's SIGTERM. Its frame was charged to the flush, but its comm_ops
    row and exposed time came only at the call's return: the rank read 4.6 s of compute and
    0.001 s of communication (a red-team find). The open call is now recorded as far as it
    ran, and sonde ranks reads it as exposed communication."""
    pytest.importorskip("mpi4py")
    script = tmp_path / "hang.py"
    script.write_text(
        "import time\n"
        "import numpy as np\n"
        "from mpi4py import MPI\n"
        "comm = MPI.COMM_WORLD\n"
        "comm.Allreduce(MPI.IN_PLACE, np.ones(4))\n"
        "if comm.Get_rank() == 1:\n"
        "    print('waiting', flush=True)\n"
        "    time.sleep(60)\n"
        "comm.Allreduce(MPI.IN_PLACE, np.ones(4))\n")
    args = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2", CLI, "run", "-o",
            tmp_path / "prof.db", "--", "/usr/bin/python3", script]
    p = subprocess.Popen([str(a) for a in args], env=clean_env(SONDE_LIBRARY=LIB),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline() == "waiting\n"  # both ranks past the first Allreduce
        time.sleep(2)  # rank 0 in the second one
        p.send_signal(signal.SIGTERM)  # as a time limit's kill reaches mpirun
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    db = tmp_path / "prof.rank0.db"
    (node_ns,), = query(db, "SELECT n.incl_ns FROM nodes n JOIN routines r USING (routine_id) "
                            "WHERE r.name = 'MPI_Allreduce'")
    (calls, comm_ns, nbytes), = query(db, "SELECT SUM(calls), SUM(time_ns), MIN(bytes) "
                                          "FROM comm_ops WHERE op = 'MPI_Allreduce'")
    assert calls == 2 and nbytes == 32, (calls, nbytes)
    assert node_ns > 1.5e9 and comm_ns == pytest.approx(node_ns, rel=0.01), (comm_ns, node_ns)
    (exposed_s,), = query(db, "SELECT exposed_s FROM rank_overlap")
    assert exposed_s == pytest.approx(comm_ns / 1e9, rel=0.01), exposed_s
