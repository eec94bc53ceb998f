"""A host that dies still leaves a valid file, and dies exactly as it would have."""
import os
import signal
import subprocess
import time

import pytest

from conftest import BIN, CLI, LIB, clean_env, integrity_ok, query, routine_calls, run

PY = "/usr/bin/python3"
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")


@pytest.mark.parametrize("how,sig", [("abort", signal.SIGABRT), ("segv", signal.SIGSEGV),
                                     ("sigterm", signal.SIGTERM), ("sigint", signal.SIGINT)])
def test_a_fatal_signal_flushes_then_kills_with_the_same_signal(db, how, sig):
    bare = run([BIN / "misbehave", how])
    profiled = run([BIN / "misbehave", how], db)
    assert bare.returncode == -sig
    assert profiled.returncode == -sig
    assert profiled.stdout == bare.stdout
    assert integrity_ok(db)
    assert routine_calls(db, "cblas_sdot") == 10
    assert query(db, "SELECT end_reason FROM processes") == [(f"signal {int(sig)}",)]
    # Said where the figures are read: a job a signal ended is no finished run to tune.
    report = subprocess.run([CLI, "report", db], capture_output=True, text=True, timeout=60)
    assert f"warning: the process was ended by signal {int(sig)} ({sig.name})" in report.stdout
    cands = subprocess.run([CLI, "candidates", db], capture_output=True, text=True, timeout=60)
    assert cands.stdout.startswith("warning: 1 of the run's processes was ended by a signal")


def test_sigkill_keeps_what_the_periodic_flush_wrote(db):
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_FLUSH_INTERVAL=0.2)
    p = subprocess.Popen([BIN / "misbehave", "spin"], env=env, stdout=subprocess.DEVNULL)
    time.sleep(1.5)
    p.kill()
    p.wait()
    assert integrity_ok(db)
    assert routine_calls(db, "cblas_sdot") > 10
    [(flushes, ended)] = query(db, "SELECT flushes, ended_ns FROM processes")
    assert flushes >= 3 and ended is None


def test_exit_from_a_signal_handler_that_interrupted_malloc_never_hangs(db):
    for _ in range(5):
        r = run([BIN / "misbehave", "sigexit"], db, timeout=60)
        assert r.returncode == 3
        assert integrity_ok(db)
        assert query(db, "SELECT end_reason FROM processes") == [("_exit",)]
        db.unlink()


def test_the_exit_status_is_kept_and_a_failure_said(tmp_path):
    """A process's exit status (run_info exit.status): preloaded, as libc's exit was given it;
    in-process under python3 -m sonde, as the launcher saw the program end. A rank that died of
    an uncaught exception read as one that had finished (a red-team find): the report says a
    failure status."""
    cases = {"raise ValueError('x')": 1, "import sys; sys.exit(0)": 0, "pass": 0,
             "import sys; sys.exit('bad')": 1, "import sys; sys.exit(4)": 4,
             "import os; os._exit(3)": 3, "import sys; sys.exit(130)": 130}
    for i, (source, status) in enumerate(cases.items()):
        program = tmp_path / f"p{i}.py"
        program.write_text(source + "\n")
        db = tmp_path / f"p{i}.db"
        r = subprocess.run([PY, "-m", "sonde", "-o", db, program], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120,
                           env=clean_env(PYTHONPATH=PYTHONPATH))
        assert r.returncode == status, (source, r.stderr)
        assert query(db, "SELECT value FROM run_info WHERE key = 'exit.status'") == \
            [(str(status),)], source
        report = subprocess.run([CLI, "report", db], capture_output=True, text=True, timeout=60)
        assert (f"the process exited with status {status}, a failure" in report.stdout) == \
            (status != 0), (source, report.stdout)
        # The why, where the status has a usual one (a deliberate sys.exit(130) after Ctrl-C
        # was told of uncaught exceptions).
        assert ("an uncaught Python exception exits with 1" in report.stdout) == (status == 1)
        assert ("128 + 2: SIGINT" in report.stdout) == (status == 130), report.stdout
    preloaded = tmp_path / "c.db"
    r = subprocess.run([BIN / "misbehave", "exit3"], env=clean_env(LD_PRELOAD=LIB,
                       SONDE_OUTPUT=preloaded), capture_output=True, timeout=60)
    assert query(preloaded, "SELECT value FROM run_info WHERE key = 'exit.status'") == \
        [(str(r.returncode),)]


def test_workers_their_parent_ends_are_no_failure_of_the_run(tmp_path):
    # `with Pool()` ends its workers with SIGTERM (Pool.terminate) and a worker process may exit
    # with a status of its own: the run's end is its main processes', and a pool's run said
    # nothing more than before.
    program = tmp_path / "pool.py"
    program.write_text(
        "import multiprocessing as mp, sys\n"
        "def work(n):\n"
        "    return sum(range(n))\n"
        "def fail():\n"
        "    sys.exit(3)\n"
        "if __name__ == '__main__':\n"
        "    mp.set_start_method('fork')\n"
        "    with mp.Pool(2) as pool:\n"
        "        print(pool.map(work, [10, 20]))\n"
        "    p = mp.Process(target=fail)\n"
        "    p.start(); p.join()\n"
        "    print(p.exitcode)\n")
    db = tmp_path / "pool.db"
    r = subprocess.run([PY, "-m", "sonde", "-o", db, program], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120,
                       env=clean_env(PYTHONPATH=PYTHONPATH))
    assert r.returncode == 0 and r.stdout == "[45, 190]\n3\n", r.stderr
    assert ("3",) in query(db, "SELECT value FROM run_info WHERE key = 'exit.status'")
    report = subprocess.run([CLI, "report", db], capture_output=True, text=True, timeout=60)
    assert "ended by signal" not in report.stdout and "exited with status" not in report.stdout, \
        report.stdout
