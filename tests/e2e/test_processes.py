"""Every process and thread of a run is recorded, with exact per-process counts."""
import os
import subprocess

from conftest import BIN, CLI, clean_env, integrity_ok, query, routine_calls, run

BUILD = os.environ.get("SONDE_BUILD", "")


def test_fork_exec_and_threads_are_processes_and_threads_of_one_run(db):
    r = run([BIN / "process_tree"], db)
    assert r.returncode == 0, r.stderr
    assert "children failed: 0" in r.stdout
    assert integrity_ok(db)
    assert query(db, "SELECT COUNT(*) FROM runs") == [(1,)]
    procs = query(db, "SELECT process_id, pid, ppid, origin, parent_process_id, end_reason "
                      "FROM processes ORDER BY process_id")
    by_origin = {}
    for row in procs:
        by_origin.setdefault(row[3], []).append(row)
    assert len(by_origin["root"]) == 1
    assert len(by_origin["fork"]) == 3
    assert len(by_origin["exec"]) == 1
    root = by_origin["root"][0]
    for fork in by_origin["fork"]:
        assert fork[2] == root[1] and fork[4] == root[0]  # ppid and parent row are the root's
    [exec_row] = by_origin["exec"]
    exec_parent = next(p for p in by_origin["fork"] if p[0] == exec_row[4])
    assert exec_parent[1] == exec_row[1]  # same pid: the image was replaced
    assert exec_parent[5] == "exec"
    # Calls per process: root 1 + 2 threads x 7, forks 3 (exit) and 2 (_exit), exec'd image 5.
    calls = sorted(routine_calls(db, "cblas_sdot", p[0]) for p in procs)
    assert calls == [0, 2, 3, 5, 15]
    # OpenBLAS's own workers may be recorded too (idle): count the threads that made calls.
    assert query(db, "SELECT COUNT(DISTINCT t.thread_id) FROM threads t JOIN nodes n "
                     "USING (thread_id) WHERE t.process_id = ? AND n.depth > 0",
                 (root[0],)) == [(3,)]
    assert {p[5] for p in by_origin["fork"]} == {"exit", "_exit", "exec"}
    # A fork child's thread is the child's: numbered from 0 there, with its id there (the
    # child's pid), not the forking thread's id in the parent, and so with its name.
    for fork in by_origin["fork"]:
        threads = query(db, "SELECT seq, tid, name FROM threads WHERE process_id = ? "
                            "ORDER BY seq", (fork[0],))
        assert threads[0][:2] == (0, fork[1]) and threads[0][2], threads


def test_children_of_an_execd_image_that_has_not_flushed_are_its_own(db):
    # `env sh -c 'a; b'`: the shell is an image of env's pid, and had not flushed when it
    # started a and b; their rows were linked to env's image, which had ended by its exec.
    known = BIN / "known_time"
    r = run(["env", "sh", "-c", f"{known} 1 1 1 >/dev/null; {known} 1 1 1 >/dev/null"], db)
    assert r.returncode == 0, r.stderr
    rows = query(db, "SELECT process_id, pid, origin, parent_process_id FROM processes "
                     "ORDER BY process_id")
    [shell] = [row for row in rows if row[2] == "exec"]
    children = [row for row in rows if row[2] in ("child", "fork") and row[1] != shell[1]]
    assert len(children) >= 2, rows
    assert all(child[3] == shell[0] for child in children), rows


def test_sonde_run_says_which_processes_of_the_run_still_write(db):
    # A helper the command leaves running (multiprocessing's resource tracker, a daemon) adds
    # its part when it ends: "profile written" alone read as a profile that would not change.
    import subprocess
    import time
    helper = "import os, time; print(os.getpid(), flush=True); time.sleep(3)"
    r = subprocess.run([CLI, "run", "-o", str(db), "--", "sh", "-c",
                        f"/usr/bin/python3 -c '{helper}' & sleep 0.6"],
                       env=clean_env(SONDE_FLUSH_INTERVAL="0.1"), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split()[0])
    assert f"sonde: 1 process of the run is still running (pid {pid}); it adds its part to the " \
           "profile when it ends" in r.stderr, r.stderr
    # One that ends moments after the root (multiprocessing's resource tracker, a forkserver)
    # is waited for, a second at most, and not said to run (it was, of every such program).
    quick = "import time; time.sleep(0.4)"
    r = subprocess.run([CLI, "run", "-o", str(db) + ".2", "--", "sh", "-c",
                        f"/usr/bin/python3 -c '{quick}' & sleep 0.2"],
                       env=clean_env(SONDE_FLUSH_INTERVAL="0.1"), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and "still running" not in r.stderr, r.stderr
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and query(
            db, "SELECT COUNT(*) FROM processes WHERE pid = ? AND ended_ns IS NULL", (pid,))[0][0]:
        time.sleep(0.2)
    assert query(db, "SELECT end_reason FROM processes WHERE pid = ? ORDER BY process_id DESC "
                     "LIMIT 1", (pid,)) == [("exit",)]


def test_a_process_of_the_run_that_has_not_written_yet_is_still_running(db):
    # A daemon started just before the command ends writes its row at its first flush, a
    # second later: `sonde run -- bash -c "nohup python3 train.py &"` read "profile written"
    # alone while the trainer went on writing for 2 s (a red-team find). The run's id in its
    # environment says it is the run's.
    import subprocess
    import time
    helper = "import os, time; print(os.getpid(), flush=True); time.sleep(2)"
    r = subprocess.run([CLI, "run", "-o", str(db), "--", "sh", "-c",
                        f"/usr/bin/python3 -c '{helper}' & sleep 0.2"],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pid = int(r.stdout.split()[0])
    # (The shell's fork child wrote its row, ended by the exec; the image has written none.)
    assert query(db, "SELECT COUNT(*) FROM processes WHERE pid = ? AND ended_ns IS NULL",
                 (pid,)) == [(0,)]
    assert f"sonde: 1 process of the run is still running (pid {pid}); it adds its part to the " \
           "profile when it ends" in r.stderr, r.stderr
    deadline = time.monotonic() + 10  # its end, before the next test
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.2)
    assert query(db, "SELECT end_reason FROM processes WHERE pid = ? ORDER BY process_id DESC "
                     "LIMIT 1", (pid,)) == [("exit",)]


def test_a_killed_worker_its_parent_has_not_waited_for_is_not_running(db):
    # A worker killed by SIGKILL whose parent never waits for it (or an orphan under a PID 1
    # that does not reap, as in containers) stays a zombie: kill(pid, 0) still succeeds on it,
    # and `sonde run` said it was "still running" and would add its part.
    import subprocess
    import time
    parent = ("import os, signal, time\n"
              "w = os.fork()\n"
              "if w == 0:\n"
              "    time.sleep(1.5); os.kill(os.getpid(), signal.SIGKILL)\n"
              "print(os.getpid(), w, flush=True)\n"
              "time.sleep(5)\n")
    script = os.path.join(os.path.dirname(str(db)), "parent.py")
    with open(script, "w") as f:
        f.write(parent)
    r = subprocess.run([CLI, "run", "-o", str(db), "--", "sh", "-c",
                        f"/usr/bin/python3 {script} & sleep 2.5"],
                       env=clean_env(SONDE_FLUSH_INTERVAL="0.1"), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    pid, worker = (int(v) for v in r.stdout.split())
    # The worker wrote a row before it was killed: unfinished, and not running.
    assert query(db, "SELECT COUNT(*) FROM processes WHERE pid = ? AND ended_ns IS NULL",
                 (worker,)) == [(1,)]
    assert f"sonde: 1 process of the run is still running (pid {pid}); it adds its part to the " \
           "profile when it ends" in r.stderr, r.stderr
    deadline = time.monotonic() + 10  # the parent's end, before the next test
    while time.monotonic() < deadline and query(
            db, "SELECT COUNT(*) FROM processes WHERE pid = ? AND ended_ns IS NULL", (pid,))[0][0]:
        time.sleep(0.2)


def test_posix_spawn_children_join_the_run_whatever_environment_they_are_given(db):
    # glibc's posix_spawn execs the child inside libc, past the exec wrappers: children given
    # an environment without sonde's variables ran unprofiled (two of these three).
    r = run([BIN / "spawn_env"], db)
    assert r.returncode == 0 and "children failed: 0" in r.stdout, r.stderr
    # Root first: children that end before the root's first flush are written before it.
    procs = query(db, "SELECT process_id, origin, parent_process_id, end_reason FROM processes "
                      "ORDER BY origin <> 'root', process_id")
    root_id = procs[0][0]
    assert [p[1:] for p in procs] == [("root", None, "exit")] + [("child", root_id, "exit")] * 3
    # The run's row is the root's, though a child wrote it first.
    assert query(db, "SELECT r.command, r.started_ns FROM runs r") == \
        query(db, "SELECT command, started_ns FROM processes WHERE origin = 'root'")
    assert [routine_calls(db, "cblas_sdot", p[0]) for p in procs] == [1, 4, 4, 4]


def test_a_host_started_with_stdin_and_stderr_closed_keeps_them_closed(db):
    # SQLite never opens a file as descriptor 0, 1 or 2: it fills a free one with /dev/null and
    # leaves it, so a host started with stdin closed had one after sonde's first flush
    # (CPython's test_posix: a posix_spawn child whose action closes fd 0). Checked after the
    # start flush and an explicit one, and in a fork child after its own; not beside a periodic
    # flush, during which they are /dev/null (docs/reliability.md).
    code = (
        "import errno, os, sonde\n"
        "def closed(fd):\n"
        "    try:\n"
        "        os.fstat(fd)\n"
        "    except OSError as e:\n"
        "        return e.errno == errno.EBADF\n"
        "    return False\n"
        "sonde.flush()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    sonde.flush()\n"
        "    os._exit(0 if closed(0) and closed(2) else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(closed(0), closed(2), os.waitstatus_to_exitcode(status), flush=True)\n")
    r = run(["sh", "-c", 'exec /usr/bin/python3 -c "$0" <&- 2>&-', code], db,
            SONDE_FLUSH_INTERVAL="0", PYTHONPATH=os.path.join(BUILD, "python"))
    assert (r.returncode, r.stdout) == (0, "True True 0\n")
    assert query(db, "SELECT origin, end_reason FROM processes ORDER BY process_id") == [
        ("root", "exec"), ("exec", "exit"), ("fork", "_exit")]  # sh, then python


def test_forking_while_another_thread_holds_sondes_locks_never_hangs(db):
    # A churning thread keeps the registry, the thread list and the store busy (flushing every
    # 5 ms) while the main thread forks: a child that inherited a held lock would hang.
    r = run([BIN / "misbehave", "fork-stress", 60], db, timeout=120, SONDE_FLUSH_INTERVAL=0.005)
    assert r.returncode == 0, r.stderr
    assert "forks ok 60" in r.stdout
    assert integrity_ok(db)
    assert query(db, "SELECT COUNT(*) FROM processes WHERE origin = 'fork'") == [(60,)]
    assert query(db, "SELECT COUNT(*) FROM processes WHERE origin = 'fork' AND end_reason "
                     "= '_exit'") == [(60,)]


def test_python_subprocess_children_join_the_run_even_with_an_empty_environment(db, tmp_path):
    # CPython's subprocess execs from a vfork child; env={} drops LD_PRELOAD, which sonde puts
    # back so the child is still part of the run.
    script = tmp_path / "spawn.py"
    script.write_text(
        "import subprocess, sys\n"
        f"prog = {str(BIN / 'blas_threads')!r}\n"
        "a = subprocess.run([prog, '1', '10'], capture_output=True, text=True)\n"
        "b = subprocess.run([prog, '1', '5'], env={}, capture_output=True, text=True)\n"
        "print(a.stdout.strip(), b.stdout.strip(), a.returncode, b.returncode)\n")
    r = run(["/usr/bin/python3", script], db)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "checksum 200.0 checksum 100.0 0 0\n"
    rows = query(db, "SELECT p.origin, p.parent_process_id, SUM(n.calls) FROM processes p "
                     "JOIN threads t USING (process_id) JOIN nodes n USING (thread_id) "
                     "JOIN routines r USING (routine_id) WHERE r.name = 'cblas_sdot' "
                     "GROUP BY p.process_id ORDER BY 3")
    [(root_id,)] = query(db, "SELECT process_id FROM processes WHERE origin = 'root'")
    assert rows == [("child", root_id, 5), ("child", root_id, 10)]


def test_many_short_threads_are_all_recorded_after_their_states_are_freed(db):
    # Ended threads are written and freed in batches (and periodically): nothing may be lost.
    r = run([BIN / "misbehave", "churn", 1500], db, SONDE_FLUSH_INTERVAL=0.1)
    assert r.returncode == 0, r.stderr
    assert routine_calls(db, "cblas_sdot") == 10 + 1500
    assert query(db, "SELECT COUNT(*) FROM threads t JOIN nodes n USING (thread_id) "
                     "WHERE n.depth > 0") == [(1501,)]
    assert integrity_ok(db)


def test_ended_threads_are_freed_in_batches_without_periodic_flushes(db, tmp_path):
    # Bursts of short threads (a thread per request) with no periodic flush: the flusher was
    # woken only as the ended threads' count passed exactly 256; threads that ended during that
    # flush left it above, the edge never came again, and states piled up (4.7 GB for 45,000
    # threads, a red-team find). Each state is ~100 KB: 256 of them are 25 MB.
    prog = tmp_path / "bursts.py"
    prog.write_text(
        "import threading\n"
        "def rss():\n"
        "    return int(open('/proc/self/statm').read().split()[1]) * 4096 >> 20\n"
        "peak, half = 0, 0\n"
        "for burst in range(80):\n"
        "    ts = [threading.Thread(target=sum, args=(range(50),)) for _ in range(50)]\n"
        "    [t.start() for t in ts]\n"
        "    [t.join() for t in ts]\n"
        "    peak = max(peak, rss())\n"
        "    if burst == 39:\n"
        "        half = peak\n"
        "print(half, peak)\n")
    r = subprocess.run(["/usr/bin/python3", "-m", "sonde", "--flush-interval", "0", "-o", db,
                        prog], capture_output=True, text=True, timeout=300,
                       env=clean_env(PYTHONPATH=os.path.join(os.environ["SONDE_BUILD"],
                                                             "python")))
    assert r.returncode == 0, r.stderr
    # MB; 4,000 threads' states unfreed are ~400 MB, growing with the threads: freed, the peak
    # stays where the flusher's lag leaves it (62-64 MB quiet here, 214 under a CI run's load),
    # the second 2,000 threads adding no more than a fraction of the first's.
    half, peak = map(int, r.stdout.split())
    assert peak < 350 and peak - half < 100, r.stdout
    assert query(db, "SELECT COUNT(*) FROM threads") == [(4001,)]


def test_children_of_a_process_that_had_not_flushed_yet_are_linked_to_it(db):
    # A fork child has no row id until its first flush: its own fork and spawn children were
    # written with no parent (a daemon's double fork, a DataLoader worker's subprocess).
    code = ("import os, subprocess\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    grandchild = os.fork()\n"
            "    if grandchild == 0:\n"
            "        os._exit(0)\n"
            "    os.waitpid(grandchild, 0)\n"
            "    subprocess.run(['/bin/true'])\n"
            "    os._exit(0)\n"
            "os.waitpid(pid, 0)\n")
    r = run(["/usr/bin/python3", "-c", code], db)
    assert r.returncode == 0, r.stderr
    rows = query(db, "SELECT process_id, pid, ppid, origin, parent_process_id FROM processes "
                     "ORDER BY process_id")
    assert sorted(row[3] for row in rows) == ["child", "fork", "fork", "root"]
    by_id = {row[0]: row for row in rows}
    for row in rows:
        if row[3] != "root":
            assert row[4] in by_id and by_id[row[4]][1] == row[2], rows  # its parent's row


def test_an_image_that_execs_ends_so_and_one_whose_exec_failed_goes_on(db, tmp_path):
    # The exec's flush writes the image's end; a periodic flush queued behind it on the flusher
    # thread, before execve replaced the image, wrote the row again without it (an in-process
    # Python that forked and exec'd read its first image unended, 1 run in 10). After an exec
    # that fails the image goes on, its periodic flushes too, and its end is its exit's.
    script = tmp_path / "execs.py"
    script.write_text(
        "import os, sys, time\n"
        "if len(sys.argv) > 1:\n"
        "    sys.exit(0)\n"
        "try:\n"
        "    os.execv('/nonexistent/program', ['x'])\n"
        "except OSError as e:\n"
        "    print('failed', e.errno)\n"
        "end = time.time() + 1.0\n"
        "while time.time() < end:\n"
        "    sum(range(1000))\n"
        "sys.stdout.flush()\n"
        "os.execv(sys.executable, [sys.executable, sys.argv[0], 'again'])\n")
    for _ in range(5):
        db.unlink(missing_ok=True)
        r = run(["/usr/bin/python3", script], db, SONDE_FLUSH_INTERVAL=0.1)
        assert r.returncode == 0 and r.stdout == "failed 2\n", r.stderr
        rows = query(db, "SELECT origin, end_reason, flushes FROM processes ORDER BY started_ns")
        assert [row[:2] for row in rows] == [("root", "exec"), ("exec", "exit")], rows
        assert rows[0][2] >= 4, rows  # flushes went on for the second after the failed exec
