"""Signals: a host under sonde meets every signal as it would alone (same handlers seen, same
death, same status), and what it did before is in the profile."""
import fcntl
import os
import pty
import re
import signal
import subprocess
import termios
import textwrap
import time

import pytest

from conftest import (CLI, LIB, PYTHON, calls, clean_env, notes, plain, preloaded, prog,
                      profile_whole, query, run, same_behaviour, sonde_run)

MODES = ["preload", "sonde-run"]
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
HOST = prog("signal_host")


def under(mode, cmd, db, **kw):
    return preloaded(cmd, db, **kw) if mode == "preload" else sonde_run(cmd, db, **kw)


def gemms(db):
    return calls(db, "cblas_sgemm")


# Every signal whose default action ends the process, but the two that cannot be caught.
TERMINATING = [signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGILL, signal.SIGTRAP,
               signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGUSR1, signal.SIGSEGV,
               signal.SIGUSR2, signal.SIGPIPE, signal.SIGALRM, signal.SIGTERM, signal.SIGSTKFLT,
               signal.SIGXCPU, signal.SIGXFSZ, signal.SIGVTALRM, signal.SIGPROF, signal.SIGIO,
               signal.SIGPWR, signal.SIGSYS, signal.SIGRTMIN, signal.SIGRTMAX]


@pytest.mark.parametrize("sig", TERMINATING, ids=lambda s: signal.Signals(s).name)
def test_default_death_flushes_first(sig, db):
    """raise(SIG) at the default disposition: same death, every call recorded"""
    cmd = [HOST, "default", int(sig)]
    alone = plain(cmd)
    assert alone.rc == -sig
    same_behaviour(alone, preloaded(cmd, db))
    profile_whole(db)
    assert gemms(db) == 10


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["chain", "reraise", "resethand", "replace"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGUSR1])
def test_host_handler(mode, how, sig, db):
    """a host handler that chains to the old one / re-raises / resets itself / exits"""
    cmd = [HOST, how, int(sig)]
    alone = plain(cmd, timeout=20)
    assert alone.rc == (5 if how == "replace" else -sig)
    same_behaviour(alone, under(mode, cmd, db, timeout=20))
    profile_whole(db)
    assert gemms(db) == 10


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how,sig,rc", [("segv", signal.SIGSEGV, -signal.SIGSEGV),
                                        ("segv", 0, -signal.SIGSEGV),
                                        ("abort", 0, -signal.SIGABRT),
                                        ("abort", signal.SIGABRT, -signal.SIGABRT),
                                        ("blocked", signal.SIGTERM, -signal.SIGTERM),
                                        ("ignored", signal.SIGTERM, 0),
                                        ("alarm", signal.SIGALRM, -signal.SIGALRM),
                                        ("alarm", signal.SIGVTALRM, -signal.SIGVTALRM)],
                         ids=["segv-chained", "segv", "abort", "abort-handled", "blocked",
                              "ignored", "sigalrm", "sigvtalrm"])
def test_faults_and_timers(mode, how, sig, rc, db):
    """a real segfault (chained or not), abort (a SIGABRT handler that returns or none), a blocked
    or ignored signal, timers"""
    cmd = [HOST, how, int(sig)]
    alone = plain(cmd, timeout=20)
    assert alone.rc == rc
    same_behaviour(alone, under(mode, cmd, db, timeout=20))
    profile_whole(db)
    assert gemms(db) == (20 if how == "blocked" else 10)


def first_line_then_close(cmd, env):
    """`cmd | head -1`: reads one line, closes the pipe, returns (exit status, line)."""
    p = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    line = p.stdout.readline()
    p.stdout.close()
    try:
        return p.wait(timeout=20), line
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return "hung", line


@pytest.mark.parametrize("mode", MODES)
def test_sigpipe(mode, db):
    """`prog | head -1`: dies of SIGPIPE, every call recorded"""
    cmd = [HOST, "pipe"]
    alone = first_line_then_close(cmd, clean_env())
    assert alone == (-signal.SIGPIPE, b"gemms done\n")
    if mode == "preload":
        profiled = first_line_then_close(cmd, clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db))
    else:
        profiled = first_line_then_close([CLI, "run", "-o", db, "--", *cmd], clean_env())
    assert profiled == alone
    profile_whole(db)
    assert gemms(db) == 10


def test_query_sees_the_hosts_dispositions(db):
    """sigaction(sig, NULL, &old) and signal() report what the host would see alone"""
    cmd = [HOST, "query"]
    same_behaviour(plain(cmd), preloaded(cmd, db))


def end_group(p):
    """Kills what is left of p's process group (p started a session of its own), reaps p."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    p.wait()


def started(p, timeout=20):
    """Waits for the host's "ready" line."""
    deadline = time.monotonic() + timeout
    line = b""
    while time.monotonic() < deadline and b"ready" not in line:
        line = p.stdout.readline()
        if not line:
            break
    assert b"ready" in line, "the host never got ready"


def signalled(cmd, env, sig, group=False, settle=0.0):
    """Starts cmd, waits for it to be ready, sends sig to it (or to its process group, as a
    terminal's ^C does), returns its exit status."""
    p = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        started(p)
        time.sleep(settle)
        if group:
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
        return p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        return "hung"
    finally:
        end_group(p)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1])
def test_signal_to_sonde_run_reaches_the_workload(sig, db, tmp_path):
    """SIG sent to `sonde run` (not to its group): forwarded, and sonde run dies of it too"""
    cmd = [HOST, "wait"]
    alone = signalled(cmd, clean_env(), sig)
    assert alone == -sig
    assert signalled([CLI, "run", "-o", db, "--", *cmd], clean_env(), sig) == alone
    profile_whole(db)
    assert gemms(db) == 10
    assert query(db, "SELECT end_reason FROM processes") == [(f"signal {int(sig)}",)]


# Handles SIGTERM and SIGINT, cleans up, then dies of the signal it got: back at the default,
# it re-raises it on itself (the idiom of CPython's own exit on ^C and of a shell's trap).
RE_RAISES = [PYTHON, "-c", textwrap.dedent("""\
    import os, signal, sys, time
    seen = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda s, f: seen.append(s))
    print("ready", flush=True)
    t = time.monotonic()
    while not seen and time.monotonic() < t + 10:
        time.sleep(0.01)
    signal.signal(seen[0], signal.SIG_DFL)
    os.kill(os.getpid(), seen[0])
    time.sleep(2)
    sys.exit(3)
    """)]
# No handler: CPython's KeyboardInterrupt, and its exit by SIGINT re-raised at the default.
SLEEPS = [PYTHON, "-c", "import time; print('ready', flush=True); time.sleep(10)"]


@pytest.mark.parametrize("cmd,sig", [(RE_RAISES, signal.SIGTERM), (RE_RAISES, signal.SIGINT),
                                     (SLEEPS, signal.SIGINT)], ids=["handler-TERM",
                                                                    "handler-INT", "python-INT"])
def test_a_signal_re_raised_after_clean_up_ends_the_command(cmd, sig, db):
    """A signal passed on by sonde run, re-raised by the program after its clean-up, kills it

    SIG sent to sonde run alone and passed on: the program cleans up and re-raises it on itself
    at the default; it dies of it, as alone. Its own kill() came within a second of sonde run's
    copy and was dropped as the second of a pair: it ran on and exited 3, and a script's ^C
    exited 130, not by SIGINT (a red-team find)."""
    alone = signalled(cmd, clean_env(), sig)
    assert alone == -sig
    assert signalled([CLI, "run", "-o", db, "--", *cmd], clean_env(), sig) == alone
    profile_whole(db)
    assert query(db, "SELECT end_reason FROM processes") == [(f"signal {int(sig)}",)]


COUNTS_TWO_SIGTERMS = [PYTHON, "-c", textwrap.dedent("""\
    import os, signal, sys, time
    n = 0
    def h(s, f):
        global n
        n += 1
    signal.signal(signal.SIGTERM, h)
    print("ready", os.getpid(), flush=True)
    t = time.monotonic()
    while n < 2 and time.monotonic() < t + 3:
        time.sleep(0.01)
    sys.exit(10 + n)
    """)]


def test_another_senders_signal_soon_after_a_passed_on_one_is_delivered(db):
    """Another sender's signal 0.1 s after one sonde run passed on reaches the handler too

    SIGTERM to sonde run (passed on), then 0.1 s later another process's SIGTERM straight to the
    command: two signals from two senders, both handled as alone (the second was dropped as
    sonde run's pair)."""
    def two_signals(cmd):
        p = subprocess.Popen(cmd, env=clean_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            words = p.stdout.readline().split()
            assert words[:1] == [b"ready"], "the host never got ready"
            p.send_signal(signal.SIGTERM)
            time.sleep(0.1)
            subprocess.run(["kill", "-TERM", words[1].decode()], check=True)
            return p.wait(timeout=20)
        finally:
            end_group(p)
    assert two_signals(COUNTS_TWO_SIGTERMS) == 12
    assert two_signals([CLI, "run", "-o", str(db), "--", *COUNTS_TWO_SIGTERMS]) == 12
    profile_whole(db)


def on_a_terminal(cmd, env):
    """Runs cmd as the foreground job of a terminal of its own, types ^C once it is ready, and
    returns its exit status."""
    master, terminal = pty.openpty()

    def take_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen([str(c) for c in cmd], env=env, stdin=terminal, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, preexec_fn=take_terminal)
    os.close(terminal)
    try:
        started(p)
        os.write(master, b"\x03")
        return p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        return "hung"
    finally:
        end_group(p)
        os.close(master)


# Counts its SIGINTs: a second one (sonde run passing on a ^C the command got already) would
# change the exit status.
COUNTS_SIGINT = [PYTHON, "-c", textwrap.dedent("""
    import signal, sys, time
    n = 0
    def h(s, f):
        global n
        n += 1
    signal.signal(signal.SIGINT, h)
    print("ready", flush=True)
    t = time.monotonic()
    while n == 0 and time.monotonic() < t + 10:
        time.sleep(0.01)
    time.sleep(0.3)
    sys.exit(10 + n)
""")]


def test_ctrl_c_reaches_the_workload_once(db):
    """^C typed on the terminal: the command gets one SIGINT, sonde run ends as it did"""
    alone = on_a_terminal(COUNTS_SIGINT, clean_env())
    assert alone == 11
    assert on_a_terminal([CLI, "run", "-o", db, "--", *COUNTS_SIGINT], clean_env()) == alone
    profile_whole(db)


COUNTS_SIGTERM = [arg.replace("SIGINT", "SIGTERM") for arg in COUNTS_SIGINT]


def test_group_kill_reaches_the_workload_once(db):
    """SIGTERM to the whole process group by a process (systemd, SLURM, kill -TERM -PGID): the
    command handles one SIGTERM, not a second one passed on by sonde run"""
    alone = signalled(COUNTS_SIGTERM, clean_env(), signal.SIGTERM, group=True)
    assert alone == 11
    assert signalled([CLI, "run", "-o", db, "--", *COUNTS_SIGTERM], clean_env(), signal.SIGTERM,
                     group=True) == alone
    profile_whole(db)


HANDLES_SIGTERM_THEN_DEFAULT = [PYTHON, "-c", textwrap.dedent("""\
    import signal, sys, time
    handled = []
    def h(s, f):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as CPython's finalization does
        handled.append(time.monotonic())
        print("handled", flush=True)
    signal.signal(signal.SIGTERM, h)
    print("ready", flush=True)
    t = time.monotonic()
    while time.monotonic() < (handled[0] + 0.5 if handled else t + 10):
        time.sleep(0.01)
    """)]


@pytest.mark.parametrize("copy", ["pair", "alone"])
def test_a_group_signals_copy_after_the_handler_is_no_second_signal(copy, db):
    """A process group's SIGTERM reaches the command from its sender and again from sonde run;
    the command's handler took the first, saved its checkpoint and went back to the default (as
    CPython does as it finalizes). The copy, a few ms later, is the same signal: it must not end
    a process exiting cleanly (a red-team job read "killed by signal 15", 3 runs in 6). The test
    is the command's parent here, and sends the copy as sonde run does (sigqueue, with its
    mark). A copy with no first (copy=alone: only the marked one sent, twice) still kills."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    # forwarded_signal_value (libprof/include/sonde/signals.hpp): the mark above the pid of
    # the signal's first sender, here the test itself.
    mark = 0x50DE5160 << 32 | os.getpid()

    def sigqueue(pid):
        assert libc.sigqueue(pid, signal.SIGTERM, ctypes.c_void_p(mark)) == 0

    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db)
    p = subprocess.Popen(HANDLES_SIGTERM_THEN_DEFAULT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        assert p.stdout.readline() == "ready\n"
        if copy == "pair":
            p.send_signal(signal.SIGTERM)  # the sender's
        else:
            sigqueue(p.pid)
        assert p.stdout.readline() == "handled\n"
        time.sleep(0.05)
        sigqueue(p.pid)  # sonde run's copy, the handler now at the default
        rc = p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    # pair: the copy dropped, the program runs on to its end (status 0); alone: two separate
    # signals from sonde run, the second kills as it would without sonde.
    assert rc == (0 if copy == "pair" else -signal.SIGTERM), rc
    profile_whole(db)


def test_sigkill_leaves_a_readable_file(db):
    """SIGKILL: the periodic flush's data stays, and the file opens"""
    cmd = [HOST, "wait"]
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_FLUSH_INTERVAL=0.1)
    assert signalled(cmd, env, signal.SIGKILL, settle=0.5) == -signal.SIGKILL
    profile_whole(db)
    assert gemms(db) == 10


def test_sigkill_of_an_execd_image_before_its_first_flush_is_said(db):
    """SIGKILL to an exec'd image before its first flush: sonde run says the profile lacks it
    (it said 'profile written to', as of a whole profile)"""
    code = ("import os, sys, time\n"
            "if len(sys.argv) == 1:\n"
            "    os.execv(sys.executable, [sys.executable, '-c', CODE, 'again'])\n"
            "print('ready', os.getpid(), flush=True)\n"
            "time.sleep(20)\n")
    code = "CODE = " + repr(code) + "\n" + code
    p = subprocess.Popen([CLI, "run", "-o", str(db), "--", PYTHON, "-c", code],
                         env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         start_new_session=True)
    try:
        words = p.stdout.readline().split()
        assert words[:1] == [b"ready"], "the command never got ready"
        os.kill(int(words[1]), signal.SIGKILL)  # the exec'd image, before its first flush (1 s)
        err = p.communicate(timeout=30)[1].decode()
    finally:
        end_group(p)
    assert p.returncode == -signal.SIGKILL  # sonde run dies of it too
    assert f"profile written to {db}, without the program the command exec'd last (killed " \
           "before its first flush)" in err, err
    assert query(db, "SELECT end_reason FROM processes") == [("exec",)]


def test_a_root_killed_before_its_first_flush_is_said_beside_its_childs_profile(db):
    """SIGKILL to the command before its first flush, its child's profile written: both say so
    (sonde run and the report say the command's own process is missing: the file read as a
    clean profile of the child, and sonde run said 'no process of this run in it')"""
    code = ("import os, signal, subprocess, sys\n"
            "subprocess.run([sys.executable, '-c', 'print(6 * 7)'])\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    r = sonde_run([PYTHON, "-c", code], db)
    assert r.rc == -signal.SIGKILL and r.out == "42\n", r.err
    assert f"the command's own process wrote nothing to {db} (see sonde's messages above); it " \
           "holds only 1 other process of the run" in r.err, r.err
    assert query(db, "SELECT origin FROM processes") == [("child",)]
    report = profile_whole(db)
    assert "warning: the run's first process (the command sonde started) wrote nothing to " \
           "this profile" in report, report


def test_a_ranked_child_does_not_hide_a_root_killed_before_its_first_flush(db):
    """The same with a child that learnt a rank (MPI's singleton start: rank 0 of 1) and has no
    parent in the file (the root never had a row): until 2026-12-06 a ranked process with no
    parent was taken for the file's first process (a rank's own file begins so), and the report
    said nothing. The process that made the file says so now (run_info output.claimed)."""
    code = ("import os, signal, subprocess, sys\n"
            "subprocess.run([sys.executable, '-c', 'from mpi4py import MPI; "
            "print(MPI.COMM_WORLD.Get_size())'])\n"
            "os.kill(os.getpid(), signal.SIGKILL)\n")
    r = sonde_run([PYTHON, "-c", code], db)
    assert r.rc == -signal.SIGKILL and r.out == "1\n", r.err
    assert (0, None) in query(db, "SELECT rank, parent_process_id FROM processes"), r.err
    assert query(db, "SELECT COUNT(*) FROM run_info WHERE key = 'output.claimed'") == [(0,)]
    report = profile_whole(db)
    assert "warning: the run's first process (the command sonde started) wrote nothing to " \
           "this profile" in report, report


def test_sigkill_to_sonde_run_ends_the_command(db):
    """SIGKILL to `sonde run` alone (`kill -9 $!`, a harness killing the process it started):
    the command dies with it, as it would have been killed alone, instead of running on
    orphaned; the profile keeps what the last periodic flush wrote"""
    cmd = [PYTHON, "-c", "import os, time\nprint('ready', os.getpid(), flush=True)\n"
                         "time.sleep(20)"]
    p = subprocess.Popen([str(c) for c in [CLI, "run", "-o", db, "--", *cmd]],
                         env=clean_env(SONDE_FLUSH_INTERVAL=0.1), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        words = p.stdout.readline().split()
        assert words[:1] == [b"ready"], "the command never got ready"
        command = int(words[1])
        time.sleep(0.5)
        p.kill()
        assert p.wait(timeout=10) == -signal.SIGKILL

        def gone():
            try:
                with open(f"/proc/{command}/stat") as f:
                    return f.read().split(") ")[1].startswith("Z")  # dead, not yet reaped
            except FileNotFoundError:
                return True
        deadline = time.monotonic() + 10
        while not gone() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert gone(), "the command ran on after sonde run was killed"
    finally:
        end_group(p)
    # Killed during one of its 0.1 s flushes, the command leaves a hot journal, which a read-only
    # connection cannot roll back (Python's sqlite3 said "attempt to write a readonly database",
    # once in a full ctest): the first reader is sonde's, as a user's would be, and rolls it back.
    assert run([CLI, "report", db], env=clean_env()).rc == 0
    profile_whole(db)
    assert query(db, "SELECT COUNT(*) FROM processes WHERE pid = ?", (command,)) == [(1,)]


STOPS_ITSELF = ("import os, signal\nos.kill(os.getpid(), signal.SIG{})\nprint('resumed')\n"
                "import numpy as np; print(float((np.ones((8, 8)) @ np.ones((8, 8))).sum()))")


def stopped_then_continued(cmd, env):
    """Runs cmd as a shell runs a job: waits for it with WUNTRACED, and once it has stopped
    sends SIGCONT to it alone. Returns (stop signal or None, exit status, stdout)."""
    # A group of its own in this session, as a shell's job: in a new session the group would
    # be orphaned, where the kernel discards a SIGTSTP at its default instead of stopping.
    p = subprocess.Popen([str(c) for c in cmd], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, process_group=0)
    try:
        stop, deadline = None, time.monotonic() + 20
        while stop is None and time.monotonic() < deadline:
            pid, status = os.waitpid(p.pid, os.WUNTRACED | os.WNOHANG)
            if pid == 0:
                time.sleep(0.02)
            elif os.WIFSTOPPED(status):
                stop = os.WSTOPSIG(status)
            else:
                raise AssertionError(f"ended without stopping (status {status:#x})")
        if stop is not None:
            os.kill(p.pid, signal.SIGCONT)
        out = p.communicate(timeout=20)[0] if stop is not None else ""
        return stop, p.returncode, out
    finally:
        end_group(p)


@pytest.mark.parametrize("sig", ["STOP", "TSTP"])
def test_command_that_stops_itself(sig, db):
    """`sonde run`'s command stops itself (SIGSTOP, SIGTSTP): sonde run stops too, as a shell's child does, and a SIGCONT to it alone continues the command"""
    cmd = [PYTHON, "-c", STOPS_ITSELF.format(sig)]
    alone = stopped_then_continued(cmd, clean_env())
    assert alone == (getattr(signal, "SIG" + sig), 0, "resumed\n512.0\n"), alone
    # sonde run waited in state S while its command was stopped: the shell saw a running job.
    profiled = stopped_then_continued([CLI, "run", "-o", db, "--", *cmd], clean_env())
    assert profiled == alone
    profile_whole(db)
    assert calls(db, "cblas_dgemm") == 1
    assert query(db, "SELECT end_reason FROM processes") == [("exit",)]


def test_not_executable_exits_126(db, tmp_path):
    """`sonde run` of a file that is not executable: 126, as docs/cli.md says"""
    script = tmp_path / "noexec.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    r = run([CLI, "run", "-o", db, "--", script], env=clean_env())
    assert r.rc == 126, r.err
    assert "ermission denied" in r.err


# Python: SIGINT becomes KeyboardInterrupt; CPython dies of SIGINT after finalizing, without
# running C atexit handlers.
PY_SIGINT = """
import os, signal, sys
import numpy as np
a = np.ones((8, 8), dtype=np.float32)
for _ in range(5001):
    a @ a
print("calls done", signal.getsignal(signal.SIGINT) is signal.default_int_handler, flush=True)
os.kill(os.getpid(), signal.SIGINT)
import time
time.sleep(10)
"""

PY_MODES = ["preload", "sonde-run", "re-exec", "in-process"]


def py_under(mode, args, db, **kw):
    if mode == "preload":
        return preloaded([PYTHON, *args], db, **kw)
    if mode == "sonde-run":
        return sonde_run([PYTHON, *args], db, **kw)
    opts = ["--in-process"] if mode == "in-process" else ["--re-exec"]
    return run([PYTHON, "-m", "sonde", "-o", db, *opts, *args],
               env=clean_env(PYTHONPATH=PYTHONPATH), **kw)


@pytest.mark.parametrize("mode", PY_MODES)
def test_python_ctrl_c(mode, db, tmp_path):
    """Python interrupted by SIGINT: KeyboardInterrupt, death by SIGINT, all 5001 calls kept"""
    path = tmp_path / "interrupted.py"
    path.write_text(PY_SIGINT)
    alone = plain([PYTHON, path], timeout=60)
    assert alone.rc == -signal.SIGINT and "KeyboardInterrupt" in alone.err
    profiled = py_under(mode, [path], db, timeout=60)
    same_behaviour(alone, profiled)
    assert "KeyboardInterrupt" in profiled.err
    profile_whole(db)
    assert gemms(db) == 5001


# A SIGTERM from outside while the main thread is inside dlopen or dlclose (an import of a C
# extension; a pool ending a worker that is still importing). The signal's flush, on sonde's
# flusher thread, asked the loader (dlsym, dladdr, dl_iterate_phdr) for the process's facts and
# waited for the lock the interrupted thread held until the handler's 3 s bound ran out: the
# process died 3.5 s after the signal, missing from its own profile (a red-team find).
PY_DLOPEN_KILLED = """
import ctypes, _ctypes, os, subprocess, sys
subprocess.Popen(["sh", "-c", f"sleep 0.5; kill -TERM {os.getpid()}"])
while True:
    handle = ctypes.CDLL(sys.argv[1])
    _ctypes.dlclose(handle._handle)
"""


@pytest.mark.parametrize("mode", PY_MODES)
def test_sigterm_inside_dlopen_is_flushed_at_once(mode, db, tmp_path):
    """SIGTERM while the host loads and unloads a library in a loop: death at once, flushed"""
    path = tmp_path / "dlopen_loop.py"
    path.write_text(PY_DLOPEN_KILLED)
    library = prog("libtorn_blank.so")
    alone = plain([PYTHON, path, library], timeout=60)
    assert alone.rc == -signal.SIGTERM, alone.err
    for _ in range(3):  # the signal lands inside the loader most times; three chances
        if os.path.exists(db):
            os.unlink(db)
        profiled = py_under(mode, [path, library], db, timeout=60)
        assert profiled.rc == -signal.SIGTERM, profiled.err
        assert profiled.seconds < alone.seconds + 1.5, (profiled.seconds, alone.seconds)
        profile_whole(db)
        reasons = query(db, "SELECT end_reason FROM processes WHERE command LIKE '%dlopen_loop%'")
        assert ("signal 15",) in reasons, (reasons, notes(db))


PY_GETSIGNAL = """
import signal
for s in sorted(signal.valid_signals()):
    try:
        print(int(s), signal.getsignal(s))
    except (OSError, ValueError) as e:
        print(int(s), type(e).__name__)
# What training frameworks do: save a handler, install theirs, put the old one back.
old = signal.getsignal(signal.SIGTERM)
signal.signal(signal.SIGTERM, lambda s, f: None)
signal.signal(signal.SIGTERM, old)
print("restored", signal.getsignal(signal.SIGTERM))
"""


@pytest.mark.parametrize("mode", PY_MODES)
def test_python_getsignal(mode, db, tmp_path):
    """signal.getsignal() returns what Python alone returns; save/restore works"""
    path = tmp_path / "getsignal.py"
    path.write_text(PY_GETSIGNAL)
    same_behaviour(plain([PYTHON, path]), py_under(mode, [path], db))
    profile_whole(db)


CPYTHON_TESTS = [["test.test_signal.PosixTests.test_getsignal",
                  "test.test_threading.InterruptMainTests"],
                 ["-k", "test_subprocess_send_signal", "test.test_asyncio.test_events"]]


@pytest.mark.skipif(not os.path.exists("/usr/lib/python3.11/test/test_signal.py"),
                    reason="libpython3.11-testsuite is not installed")
@pytest.mark.parametrize("tests", CPYTHON_TESTS, ids=["getsignal-interrupt_main", "asyncio"])
def test_cpython_signal_tests(tests, db):
    """CPython's own test_getsignal, interrupt_main and asyncio send_signal tests pass under
    LD_PRELOAD"""
    r = preloaded([PYTHON, "-m", "unittest", *tests], db, timeout=120)
    assert r.rc == 0, r.err[-2000:]
    profile_whole(db)


# subprocess starts children with vfork: the child resets the parent's handlers through
# sigaction while it runs in the parent's memory, which must not change what the parent sees.
PY_SPAWNS = """
import os, signal, subprocess, sys
signal.signal(signal.SIGTERM, lambda s, f: print("SIGTERM handled", flush=True))
for restore in (True, False):
    # What the child inherited ignored (libsonde, which the child loads too, catches the rest).
    status = subprocess.run(["grep", "^SigIgn", "/proc/self/status"], restore_signals=restore,
                            capture_output=True, text=True).stdout
    print(restore, status.replace("\\t", " ").strip().replace("\\n", ", "), flush=True)
print(signal.getsignal(signal.SIGINT) is signal.default_int_handler,
      signal.getsignal(signal.SIGPIPE), flush=True)
os.kill(os.getpid(), signal.SIGTERM)
try:
    os.kill(os.getpid(), signal.SIGINT)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
"""


@pytest.mark.parametrize("mode", PY_MODES)
def test_python_subprocess_keeps_the_parents_handlers(mode, db, tmp_path):
    """Python starting children (vfork): children see the dispositions they would alone, the
    parent keeps its handlers"""
    path = tmp_path / "spawns.py"
    path.write_text(PY_SPAWNS)
    alone = plain([PYTHON, path])
    assert alone.rc == 0 and "KeyboardInterrupt" in alone.out and "SIGTERM handled" in alone.out
    same_behaviour(alone, py_under(mode, [path], db))
    profile_whole(db)


def pid_namespaces():
    return run(["unshare", "-p", "-f", "true"], timeout=20).rc == 0


@pytest.mark.skipif(not pid_namespaces(), reason="unshare -p is not permitted here")
@pytest.mark.parametrize("how,sig", [("default", signal.SIGTERM), ("segv", 0), ("abort", 0)],
                         ids=["sigterm", "segv", "abort"])
def test_init_of_a_pid_namespace(how, sig, db):
    """the host is PID 1 of a container: a raised SIGTERM is ignored, a fault kills, as alone"""
    cmd = ["unshare", "-p", "-f", HOST, how, int(sig)]
    alone = plain(cmd, timeout=20)
    same_behaviour(alone, preloaded(cmd, db, timeout=20))
    profile_whole(db)
    assert gemms(db) == 10
    # unshare is profiled too: the host is the image it execs.
    ends = {"default": "exit", "segv": f"signal {int(signal.SIGSEGV)}",
            "abort": f"signal {int(signal.SIGABRT)}"}
    assert query(db, "SELECT end_reason FROM processes WHERE origin = 'exec'") == [(ends[how],)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stack", ["stack", "altstack"])
def test_siglongjmp_out_of_a_wrapped_call(mode, stack, db):
    """a SIGALRM handler siglongjmps out of cblas_ddot 20 times, then 10 dgemm calls: every call
    counted, the abandoned ones said in a note (issue 37)"""
    cmd = [prog("longjmp_out"), *([stack] if stack == "altstack" else [])]
    alone = plain(cmd, timeout=60)
    assert alone.rc == 0, alone.err
    r = under(mode, cmd, db, timeout=60)
    same_behaviour(alone, r)
    profile_whole(db)
    abandoned, finished = int(r.out.split()[1]), int(r.out.split()[3])
    assert abandoned > 0, r.out  # else the cell tests nothing: the timer never beat the ddot
    # Before: 1 ddot and 0 dgemm, every call after the first jump dropped. Each of the 20 ddots
    # was called, and the one before that sets OpenBLAS up, unless a timer came before its call
    # did (0.5 ms between setitimer and the call: a loaded machine, 1 in a CI run): that ddot
    # never ran, under sonde or alone.
    ddots = calls(db, "cblas_ddot")
    assert finished + 1 <= ddots <= 21, r.out
    assert calls(db, "cblas_dgemm") == 10
    # The note counts the ddots that began and never returned: the program's own count less the
    # jumps that came before their call did (19 of 20 once, in a CI run beside a build).
    left = ddots - 1 - finished
    assert 0 < left <= abandoned, (left, r.out)
    (note,) = [n for n in notes(db) if "longjmp" in n]
    assert note.startswith(f"{left} measured calls") and "caller" in note, note


@pytest.mark.parametrize("mode", MODES)
def test_siglongjmp_before_the_clock_starts(mode, db):
    """a SIGSEGV handler siglongjmps out of ddot_ 20 times, each as sonde's cost model reads the
    unreadable length, before the call's clock starts: every later call counted (issue 37)"""
    cmd = [prog("longjmp_bad_arg")]
    alone = plain(cmd, timeout=30)
    assert alone.rc == 0 and alone.out.startswith("ddot_ 20 faulted 0 returned"), alone.out
    same_behaviour(alone, under(mode, cmd, db, timeout=30))
    profile_whole(db)
    # Before: 1 ddot_ and nothing else, the suppress flag left up by the first jump.
    assert calls(db, "ddot_") == 120
    assert calls(db, "cblas_dgemm") == 10
    (note,) = [n for n in notes(db) if "longjmp" in n]
    assert note.startswith("20 measured calls"), note


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stack", ["stack", "altstack"])
def test_siglongjmp_storm(mode, stack, db):
    """a SIGALRM every 20 us for a second, its handler siglongjmps out of wherever the thread is
    (thousands of times inside cblas_ddot's wrapper, at every step of it): the calls made after
    the storm are all counted (issue 37)"""
    cmd = [prog("longjmp_storm"), *([stack] if stack == "altstack" else [])]
    alone = plain(cmd, timeout=60)
    assert alone.rc == 0 and alone.out.startswith("ddot right"), alone.out
    r = under(mode, cmd, db, timeout=60)
    same_behaviour(alone, r)
    profile_whole(db)
    jumps, finished = (int(v) for v in re.search(r"^jumps (\d+) ddot (\d+) finished$", r.err,
                                                  re.M).groups())
    assert jumps >= 100, r.err  # else there was no storm
    # Before: no call counted after the first jump that came between a frame's opening and its
    # clock's start (within the storm's first dozen jumps).
    assert calls(db, "cblas_daxpy") == 1000
    assert calls(db, "cblas_dgemm") == 10
    # A ddot counted and not finished was left by a jump: inside the wrapper, said in the note,
    # or after its frame closed. The one before the storm finished.
    (note,) = [n for n in notes(db) if "longjmp" in n]
    left = int(note.split()[0])
    assert 0 < left <= calls(db, "cblas_ddot") - (finished + 1) <= jumps, (note, r.err)


@pytest.mark.skipif(not os.path.exists(prog("longjmp_mpi")), reason="sonde built without MPI")
@pytest.mark.parametrize("mode", MODES)
def test_siglongjmp_storm_through_mpi(mode, db):
    """the storm's handler siglongjmps out of MPI_Allreduce (one rank) thousands of times, at
    every step of its wrapper: the MPI calls made after the storm are all counted (issue 37)"""
    cmd = [prog("longjmp_mpi")]
    alone = plain(cmd, timeout=60)
    assert alone.rc == 0 and alone.out.startswith("allreduce right"), alone.out + alone.err
    r = under(mode, cmd, db, timeout=60)
    same_behaviour(alone, r)
    profile_whole(db)
    jumps, finished = (int(v) for v in re.search(r"^jumps (\d+) allreduce (\d+) finished$",
                                                  r.err, re.M).groups())
    assert jumps >= 100, r.err  # else there was no storm
    # Before: none, the wrapper's frame left open by the first jump out of the real call
    # (MPI's frames had no stack pointer to be judged by) and its suppress flag left up.
    assert calls(db, "MPI_Barrier") == 1000
    assert calls(db, "MPI_Bcast") == 10
    (note,) = [n for n in notes(db) if "longjmp" in n]
    left = int(note.split()[0])
    assert 0 < left <= calls(db, "MPI_Allreduce") - (finished + 1) <= jumps, (note, r.err)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["returns", "returns-altstack"])
def test_a_handler_that_returns_abandons_nothing(mode, how, db):
    """the same SIGALRM handler calls cblas_dnrm2 and returns (on the thread's stack or a
    sigaltstack): the interrupted ddot goes on, nothing is taken for abandoned"""
    cmd = [prog("longjmp_out"), how]
    alone = plain(cmd, timeout=60)
    assert alone.rc == 0 and "ddot 0 abandoned 20 finished" in alone.out, alone.out
    assert alone.out.endswith("handler ran: yes\n"), alone.out  # it did run inside a ddot
    same_behaviour(alone, under(mode, cmd, db, timeout=60))
    profile_whole(db)
    assert calls(db, "cblas_ddot") == 21  # and the one before, that sets OpenBLAS up
    assert calls(db, "cblas_dgemm") == 10
    assert calls(db, "cblas_dnrm2") == 0  # inside a ddot: BLAS inside BLAS
    assert not [n for n in notes(db) if "longjmp" in n]
