"""Cells for the ends of processes and threads: exit while sonde's flusher works, threads still
running at exit, processes whose last thread ends with pthread_exit, many children ending at
once, forks, spawns and execs. A host must end as it does alone, with a whole profile."""
import math
import os
import re
import signal
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import (LIB, PYTHON, calls, clean_env, in_process, notes, plain, preloaded, prog,
                      profile_whole, query, same_behaviour, sonde_run)

SCRIPTS = Path(__file__).parent / "scripts"
ONE_BLAS_THREAD = {"OPENBLAS_NUM_THREADS": "1"}
MODES = ["preload", "sonde-run"]


def under(mode, cmd, db, **kw):
    return preloaded(cmd, db, **kw) if mode == "preload" else sonde_run(cmd, db, **kw)


def processes(db):
    return query(db, "SELECT origin FROM processes ORDER BY process_id")


# libstdc++'s own functions that register one only when first used, which sonde never does
# (libstdc++ is built into libsonde.so where the build links against the portable kit).
LIBSTDCXX_LAZY = {
    # thread_local destructors' own list, used only where glibc has no
    # __cxa_thread_atexit_impl (before 2.18; the wheel needs 2.28)
    "std::(anonymous namespace)::key_init()",
    # the std::messages facet's catalogs, which sonde never opens
    "std::get_catalogs()",
}


def test_no_exit_time_destructors():
    """libsonde.so registers no exit-time destructor (a flush may run while exit handlers do),
    but libstdc++'s built-in ones that do nothing (its constant_init wrappers of the error
    categories and memory resources, whose destructor is a bare return) and those it registers
    only when first used, which sonde does not"""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", LIB], text=True,
                         capture_output=True, check=True).stdout
    registering, function, last_lea, bodies = {}, "", "", {}
    for line in dis.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            function = m.group(1)
            bodies[function] = []
            continue
        if function:
            bodies[function].append(line.split("\t")[-1].strip())
        lea = re.search(r"lea .*,%rdi .*# [0-9a-f]+ <(.*)>$", line)
        if lea:
            last_lea = lea.group(1)
        elif re.search(r"(call|jmp) +[0-9a-f]+ <__cxa_atexit@plt>", line):
            registering.setdefault(function, set()).add(last_lea)
    harmful = {}
    for fn, destructors in registering.items():
        if fn in LIBSTDCXX_LAZY or fn == "atexit":  # glibc's atexit forwards its caller's
            continue
        real = {d for d in destructors
                if [i for i in bodies.get(d, ["?"]) if i and not i.startswith(("nop", "cs nop",
                                                                               "xchg"))]
                != ["endbr64", "ret"]}
        if real:
            harmful[fn] = sorted(real)
    assert not harmful, f"exit-time destructors registered: {harmful}"


def test_exit_while_flushing(tmp_path):
    """exit while the flusher names new call sites and exit handlers allocate (8 runs)"""
    cmd = [prog("exit_race")]
    env = dict(ONE_BLAS_THREAD, SONDE_FLUSH_INTERVAL="0.1")
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=20)
    for i in range(8):
        db = str(tmp_path / f"race{i}.db")
        same_behaviour(alone, preloaded(cmd, db, env_extra=env, timeout=20))
        profile_whole(db)
        assert calls(db, "cblas_sgemm") >= 512


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["main", "fork", "fork-main"])
def test_last_thread_ends(mode, how, db):
    """the last thread ends with pthread_exit (HOW): the process ends, as it does alone"""
    cmd = [prog("last_thread"), how]
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=10)
    assert alone.rc == 0
    same_behaviour(alone, under(mode, cmd, db, env_extra=ONE_BLAS_THREAD, timeout=10))
    profile_whole(db)
    expected = {"main": 8, "fork": 12, "fork-main": 17}[how]
    assert calls(db, "cblas_sgemm") == expected
    assert len(processes(db)) == (1 if how == "main" else 2)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["strict", "plain"])
def test_raw_exit_of_the_only_thread(mode, how, db):
    """the only thread ends with a raw SYS_exit (HOW: in a SECCOMP_MODE_STRICT sandbox, or not): it ends as alone"""
    cmd = [prog("raw_exit"), how, 3]
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=10)
    assert alone.rc == 3 and alone.out == "done\n", alone
    # Hung until killed before: sonde's thread outlived the host's, with every signal blocked.
    same_behaviour(alone, under(mode, cmd, db, env_extra=ONE_BLAS_THREAD, timeout=10))
    profile_whole(db)
    # In strict mode rdtsc faults and no system call is left: sonde measures nothing there
    # (the two GEMMs in the sandbox died under sonde before, SIGSEGV then SIGKILL).
    assert calls(db, "cblas_sgemm") == (3 if how == "strict" else 5)
    assert any("SECCOMP_MODE_STRICT" in n for n in notes(db)) == (how == "strict")
    assert query(db, "SELECT end_reason FROM processes") == [("thread exit",)]


SECCOMP_CASES = [("prctl", "kill-process"), ("prctl", "kill-thread"), ("prctl", "trap"),
                 ("syscall", "kill-process"), ("tsync", "kill-process"), ("tsync", "trap"),
                 ("thread", "kill-process"), ("refused", "kill-process"), ("raw", "kill-process")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how,action", SECCOMP_CASES)
def test_seccomp_filter_that_kills_at_open(mode, how, action, db):
    """a seccomp-bpf filter that ends the host at open/openat (HOW, ACTION), then "done" and exit 0: it ends as alone, the loss said"""
    cmd = [prog("seccomp_filter"), how, action]
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=10)
    assert alone.rc == 0 and alone.out == "done\n", alone
    # No periodic flush: what the file holds is what the flush before the filter wrote (the
    # first one, 1 s in, for the raw call, which sonde does not see).
    env = dict(ONE_BLAS_THREAD, SONDE_FLUSH_INTERVAL="0" if how != "raw" else "30")
    profiled = under(mode, cmd, db, env_extra=env, timeout=10)
    # Killed by SIGSYS at the exit flush's open before (KILL_THREAD: hung, the other threads
    # left), stdout lost.
    same_behaviour(alone, profiled)
    report = profile_whole(db)
    said = [n for n in notes(db) if n.startswith("a seccomp filter was installed")]
    ends = query(db, "SELECT end_reason FROM processes")
    if how == "raw":  # found by asking the kernel before the exit flush, said on stderr
        assert "a seccomp filter sonde did not see installed" in profiled.err, profiled.err
        assert not said and calls(db, "cblas_sgemm") == 3 and ends == [(None,)]
        assert "did not write its final flush" in report
        return
    assert len(said) == 1 and profiled.err.count("a seccomp filter on ") == 1, profiled.err
    if how == "refused":  # said as it came, then unsaid
        assert any("refused (Invalid argument)" in n for n in notes(db))
        assert "refused (Invalid argument)" in profiled.err
        assert calls(db, "cblas_sgemm") == 6 and ends == [("exit",)]
        return
    assert ("every thread" in said[0]) == (how == "tsync"), said
    assert profiled.err.count("a seccomp filter on ") == 1, profiled.err
    if how == "thread":
        # The filtered thread's calls are written by main's exit flush, outside the filter.
        assert calls(db, "cblas_sgemm") == 3 + 1 + 2 + 1 and ends == [("exit",)]
    else:
        assert calls(db, "cblas_sgemm") == 3 and ends == [(None,)]
        # The reader says the filter, not a SIGKILL, ended the record.
        assert "seccomp filter was installed" in report
        assert "did not write its final flush" not in report


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["prctl", "tsync"])
def test_seccomp_filter_that_kills_at_read_with_counters_on(mode, how, db):
    """a seccomp-bpf filter that ends the host at read (HOW), counters on (each read of them a read system call): it ends as alone, the counters stopped at the filter and said"""
    cmd = [prog("seccomp_filter"), how, "kill-process", "read"]
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=10)
    assert alone.rc == 0 and alone.out == "done\n", alone
    env = dict(ONE_BLAS_THREAD, SONDE_FLUSH_INTERVAL="0", SONDE_COUNTERS="perf::TASK-CLOCK")
    profiled = under(mode, cmd, db, env_extra=env, timeout=10)
    # Killed by SIGSYS at the first GEMM after the filter: its counter read.
    same_behaviour(alone, profiled)
    profile_whole(db)
    said = [n for n in notes(db) if n.startswith("a seccomp filter was installed")]
    assert len(said) == 1 and "counters (SONDE_COUNTERS) stop there" in said[0], notes(db)
    # The flush before the filter holds the 3 GEMMs with their task-clock counted.
    assert calls(db, "cblas_sgemm") == 3
    assert query(db, "SELECT COUNT(*) FROM node_counters WHERE incl > 0")[0][0] > 0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("at", ["sigprocmask", "getpid"])
@pytest.mark.parametrize("what", ["fork", "resethand"])
def test_seccomp_filter_then_fork_or_signal(mode, at, what, db):
    """a seccomp-bpf filter that ends the host at rt_sigprocmask or getpid (AT), neither of which glibc's fork or a signal's delivery makes, then a fork or an SA_RESETHAND signal (WHAT): it goes on as alone (issue 37)"""
    cmd = [prog("seccomp_fork"), at, what]
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=10)
    assert alone.rc == 0 and alone.out.startswith("done, "), alone
    env = dict(ONE_BLAS_THREAD, SONDE_FLUSH_INTERVAL="0")
    profiled = under(mode, cmd, db, env_extra=env, timeout=10)
    # Before: killed by SIGSYS (rt_sigprocmask: sonde's fork handlers and its signal table's
    # lock blocked the thread's signals; getpid: its fork child and its SA_RESETHAND reset asked
    # whether they ran in a vfork child), or the fork child killed so.
    same_behaviour(alone, profiled)
    profile_whole(db)
    # What ran before the filter, written as it came; _exit writes nothing after.
    assert calls(db, "cblas_sgemm") == 2
    assert any(n.startswith("a seccomp filter was installed") for n in notes(db))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("at", ["sigaction", "tgkill", "getpid", "sigprocmask"])
def test_seccomp_filter_then_a_signal_at_its_default(mode, at, db):
    """a seccomp-bpf filter that ends the host at a system call sonde's handler makes to end it (AT), then SIGTERM at its default: it dies of SIGTERM as alone, the profile kept to the filter, the hand-back said"""
    cmd = [prog("seccomp_fork"), at, "default"]
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=10)
    assert alone.rc == -signal.SIGTERM and alone.out == "before the signal\n", alone
    env = dict(ONE_BLAS_THREAD, SONDE_FLUSH_INTERVAL="0")
    profiled = under(mode, cmd, db, env_extra=env, timeout=10)
    # Before: killed by SIGSYS, as sonde's handler re-raised the signal (rt_sigaction, tgkill)
    # or asked its pid. The filter's program, read before it went in, kills for that call: the
    # kernel holds the default again, and the signal is the death it is alone, unflushed.
    same_behaviour(alone, profiled)
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 2
    said = [n for n in notes(db) if n.startswith("a seccomp filter was installed")]
    assert len(said) == 1 and "ends it from then on as without sonde, with no flush" in said[0]


@pytest.mark.parametrize("mode", MODES)
def test_seccomp_filter_that_spares_the_signal_path_keeps_sondes_handler(mode, db):
    """a seccomp-bpf filter that kills at openat only, then SIGTERM at its default: sonde's handler stays (no hand-back said), the host dies of SIGTERM as alone"""
    cmd = [prog("seccomp_fork"), "openat", "default"]
    alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=10)
    assert alone.rc == -signal.SIGTERM, alone
    env = dict(ONE_BLAS_THREAD, SONDE_FLUSH_INTERVAL="0")
    profiled = under(mode, cmd, db, env_extra=env, timeout=10)
    same_behaviour(alone, profiled)
    said = [n for n in notes(db) if n.startswith("a seccomp filter was installed")]
    assert len(said) == 1 and "with no flush" not in said[0], said


def test_raw_exit_then_sigterm_while_the_file_is_locked(db):
    """the only thread ends with a raw SYS_exit while another process holds the profile: SIGTERM ends it"""
    # No periodic flush: one waiting for the lock when the host's thread left would hold off
    # the signal until it gave up (15 s), as sonde's thread blocks the host's signals meanwhile.
    # Hung before: the last flush blocked the signals end_without_host had just unblocked
    # (flush's AsyncSignalBlock, meant for host threads).
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_FLUSH_INTERVAL="0", **ONE_BLAS_THREAD)
    p = subprocess.Popen([prog("raw_exit"), "wait", "0"], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert p.stdout.readline() == "ready\n"
        holder = sqlite3.connect(db, timeout=30)
        holder.execute("BEGIN EXCLUSIVE")
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline() == "done\n"
        time.sleep(0.5)  # the host's thread is gone; sonde's last flush waits for the lock
        start = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=5)
        seconds = time.monotonic() - start
        holder.rollback()
        holder.close()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    # Nothing of the program is left to handle it: it dies of SIGTERM at once.
    assert p.returncode == -signal.SIGTERM and seconds < 2
    profile_whole(db)  # as it was before the last flush: the profile sonde created at start


def test_ended_threads_intercepted(db):
    """threads that called BLAS ended before a periodic flush: no "nothing intercepted" note"""
    cmd = [prog("thread_ends"), 4, 10, 400]
    env = dict(ONE_BLAS_THREAD, SONDE_FLUSH_INTERVAL="0.1")
    same_behaviour(plain(cmd, env_extra=ONE_BLAS_THREAD), preloaded(cmd, db, env_extra=env))
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 40
    assert not [n for n in notes(db) if "nothing was intercepted" in n]


@pytest.mark.parametrize("mode", MODES)
def test_threads_end_and_cancel(mode, db):
    """64 threads calling BLAS, and one cancelled while it calls: every call recorded"""
    cmd = [prog("thread_ends"), 64, 25, 0, "cancel"]
    same_behaviour(plain(cmd, env_extra=ONE_BLAS_THREAD),
                   under(mode, cmd, db, env_extra=ONE_BLAS_THREAD))
    profile_whole(db)
    assert calls(db, "cblas_sgemm") > 64 * 25  # and the cancelled thread's
    assert query(db, "SELECT count(*) FROM threads")[0][0] >= 66


def test_children_exit_together(db):
    """400 fork children ending with _exit at the same moment: every call recorded"""
    cmd = [prog("exit_together"), 400, 10]
    same_behaviour(plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=60),
                   preloaded(cmd, db, env_extra=ONE_BLAS_THREAD, timeout=60))
    profile_whole(db)
    assert len(processes(db)) == 401
    assert calls(db, "cblas_sgemm") == 400 * 10 + 1


@pytest.mark.parametrize("how", ["fork", "vfork", "posix_spawn", "exec"])
def test_process_starts(how, db):
    """a process started by HOW: both processes recorded, every call"""
    cmd = [prog("spawn_kinds"), how, prog("exit_status"), 0]
    same_behaviour(plain(cmd, env_extra=ONE_BLAS_THREAD),
                   preloaded(cmd, db, env_extra=ONE_BLAS_THREAD))
    profile_whole(db)
    child = {"fork": "fork", "exec": "exec"}.get(how, "child")
    assert sorted(o for (o,) in processes(db)) == sorted(["root", child])
    assert calls(db, "cblas_sgemm") == (10 if how == "fork" else 15)


@pytest.mark.parametrize("launch", ["preload", "in-process"])
@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
def test_multiprocessing(method, launch, db):
    """a multiprocessing pool (METHOD) multiplying with numpy: same results, every product"""
    cmd = [PYTHON, SCRIPTS / "mp_pool.py", method]
    profiled = (preloaded(cmd, db, env_extra=ONE_BLAS_THREAD) if launch == "preload" else
                in_process(cmd[1:], db, env_extra=ONE_BLAS_THREAD))
    same_behaviour(plain(cmd, env_extra=ONE_BLAS_THREAD), profiled)
    profile_whole(db)
    assert calls(db, "cblas_dgemm") == 20
    assert len(processes(db)) >= 3  # the pool's two workers at least


def test_cpython_fork_from_thread(db):
    """CPython's test_main_thread_after_fork_from_nonmain_thread passes under sonde"""
    cmd = [PYTHON, "-m", "unittest", "test.test_threading.ThreadTests."
           "test_main_thread_after_fork_from_nonmain_thread"]
    alone = plain(cmd, timeout=30)
    if alone.rc != 0 and "No module named" in alone.err:
        pytest.skip("CPython's test package is not installed")
    profiled = preloaded(cmd, db, timeout=30)
    same_behaviour(alone, profiled)
    assert profiled.err.count(" ok") == alone.err.count(" ok")
    profile_whole(db)


def test_detached_thread_at_exit(tmp_path):
    """a detached thread inside the BLAS when main returns: no more deaths than alone (40 runs)"""
    # The host races with OpenBLAS's own destructor and dies now and then by itself; sonde's
    # final flush, once run after the libraries' destructors, made that 6 times likelier.
    deaths_alone = deaths_profiled = 0
    for i in range(40):
        cmd = [prog("detached_blas"), 64, i % 4]
        alone = plain(cmd, env_extra=ONE_BLAS_THREAD, timeout=20)
        profiled = preloaded(cmd, str(tmp_path / f"d{i}.db"), env_extra=ONE_BLAS_THREAD,
                             timeout=20)
        assert not profiled.timed_out
        deaths_alone += alone.rc != 0
        deaths_profiled += profiled.rc != 0
        if profiled.rc == 0:
            profile_whole(str(tmp_path / f"d{i}.db"))
    # The host's own death rate swings with the machine's load (3 to 39 of 40 seen alone here),
    # so the two rates are compared as proportions: a one-sided two-proportion z-test fails the
    # cell at z > 3 (p < 0.0014). The defect it guards against (12-16 of 20 deaths against 0
    # alone) gives z > 4.
    n = 40
    pooled = (deaths_alone + deaths_profiled) / (2 * n)
    spread = math.sqrt(pooled * (1 - pooled) * 2 / n) if 0 < pooled < 1 else 1.0
    z = (deaths_profiled - deaths_alone) / n / spread
    assert z <= 3, f"{deaths_profiled} deaths of {n}, alone {deaths_alone} (z = {z:.1f})"


def test_exit_while_file_locked(db):
    """_exit while another process holds the profile's file: the loss is said on stderr"""
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_FLUSH_INTERVAL="0.1",
                    **ONE_BLAS_THREAD)
    p = subprocess.Popen([prog("exit_when_told")], env=env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        assert p.stdout.readline() == "ready\n"
        holder = sqlite3.connect(db, timeout=30)
        holder.execute("BEGIN EXCLUSIVE")
        time.sleep(0.3)  # the periodic flush now waits for the lock
        start = time.monotonic()
        out, err = p.communicate("go\n", timeout=30)
        seconds = time.monotonic() - start
        holder.rollback()
        holder.close()
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 3
    assert seconds < 25
    # Said by the flush that failed, or by _exit when the flusher never got to it.
    assert "failed: database is locked" in err or "before its profile was written" in err, err
    profile_whole(db)


def test_sigterm_while_the_runs_other_writers_take_their_turns(db):
    """SIGTERM at its default while the run's other writers hold the file in turn for 5 s: the flush waits for its turn and the end is written"""
    # A Pool's workers ended together by SIGTERM, their parent writing too: a worker's flush
    # waited 3 s for the file, then the process died with its end unwritten (seen once in CI,
    # under a CPython build's load). The holder here writes in turn, as other writers do.
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, **ONE_BLAS_THREAD)
    p = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    try:
        for _ in range(100):  # its first flush (at 1 s) writes its row
            time.sleep(0.1)
            if os.path.exists(db) and query(db, "SELECT count(*) FROM processes")[0][0]:
                break
        holder = sqlite3.connect(db, timeout=30, isolation_level=None)
        holder.execute("CREATE TABLE turns (t REAL)")
        sent = None
        end = time.monotonic() + 5
        while time.monotonic() < end:
            holder.execute("BEGIN EXCLUSIVE")
            holder.execute("INSERT INTO turns VALUES (?)", (time.monotonic(),))
            if sent is None:
                p.send_signal(signal.SIGTERM)
                sent = time.monotonic()
            time.sleep(0.3)
            holder.execute("COMMIT")
        holder.close()
        p.wait(timeout=30)
        seconds = time.monotonic() - sent
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == -signal.SIGTERM
    assert 4 < seconds < 10, seconds  # its turn came when the holder's ended
    assert query(db, "SELECT end_reason FROM processes") == [("signal 15",)]
    profile_whole(db)


FORK_THEN_EXIT = """import os, sys
if sys.argv[1] == "kill":
    os.kill(os.getpid(), 15)
pid = os.fork()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("how", ["fork-child-exit", "sigterm"])
def test_flusher_thread_refused(how, other_user_dir):
    """no thread left for sonde's flusher (ulimit -u): no 3 s wait at _exit or a signal, every process and the reason in the profile"""
    flusher_refused(how, other_user_dir)  # under another user's RLIMIT_NPROC


def flusher_refused(how, tmp_path):
    script = tmp_path / "fork_exit.py"
    script.write_text(FORK_THEN_EXIT)
    db = str(tmp_path / "prof.db")
    # nobody's processes: the shell, the host and sonde's flusher; a fork child has no room for
    # a flusher of its own, and for the sigterm case the root gets none either.
    limit = 3 if how == "fork-child-exit" else 1
    arg = "kill" if how == "sigterm" else "exit"
    def cmd(env):
        return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", *env,
                "bash", "-c", f'ulimit -u {limit}; exec "$@"', "sh", PYTHON, str(script), arg]
    alone = plain(cmd([]))
    profiled = plain(cmd([f"LD_PRELOAD={LIB}", f"SONDE_OUTPUT={db}"]))
    same_behaviour(alone, profiled)
    assert profiled.seconds < alone.seconds + 2, f"{profiled.seconds:.1f} s, {alone.seconds:.1f} alone"
    profile_whole(db)
    origins = sorted(o for (o,) in query(db, "SELECT origin FROM processes"))
    # bash, the interpreter it became, and the fork child
    assert origins == (["exec", "fork", "root"] if how == "fork-child-exit" else ["exec", "root"])
    assert any("flusher thread could not be started" in n for n in notes(db))


@pytest.mark.parametrize("mode", MODES)
def test_privilege_drop_as_setpriv_does(mode, other_user_dir):
    """a root host that drops its privileges as setpriv does (its capabilities kept on its own thread, then setresuid and setresgid): runs as without sonde, its own process in the profile"""
    # glibc changes the ids on every thread and aborts when one thread's call fails: sonde's
    # thread, without the capabilities setpriv kept on its own, failed the gid change.
    db = str(other_user_dir / "prof.db")
    cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", PYTHON, "-c",
           "import os; print(os.getuid(), os.getgid(), os.getgroups())"]
    alone = plain(cmd)
    assert alone.rc == 0 and alone.out == "65534 65534 []\n", alone.err
    profiled = preloaded(cmd, db) if mode == "preload" else sonde_run(cmd, db)
    same_behaviour(alone, profiled)
    profile_whole(db)
    assert query(db, "SELECT origin, end_reason FROM processes WHERE origin = 'root'") == \
        [("root", "exec")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["unshare -U", "unshare -r", "fork-then-unshare"])
def test_entering_a_user_namespace(mode, how, db, tmp_path):
    """a host that enters a new user namespace (`unshare -U`, `unshare -r`, a fork child that
    calls unshare(CLONE_NEWUSER) as sandboxes do): runs as without sonde, its calls recorded"""
    # The kernel refuses a new user namespace to a process of more than one thread (EINVAL):
    # sonde's flusher thread made every one of these fail.
    if how == "fork-then-unshare":
        script = tmp_path / "forkuns.py"
        script.write_text(textwrap.dedent("""
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            pid = os.fork()
            if pid == 0:
                rc = libc.unshare(0x10000000)  # CLONE_NEWUSER
                print("child", rc, os.strerror(ctypes.get_errno()) if rc else "ok", flush=True)
                os._exit(0 if rc == 0 else 1)
            print("parent", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
        """))
        cmd = [PYTHON, str(script)]
    else:
        cmd = how.split() + ["id", "-u"]
    alone = plain(cmd)
    if alone.rc != 0:
        pytest.skip(f"user namespaces are not available here: {alone.err.strip()}")
    profiled = preloaded(cmd, db) if mode == "preload" else sonde_run(cmd, db)
    same_behaviour(alone, profiled)
    profile_whole(db)
    assert query(db, "SELECT COUNT(*) FROM processes") >= [(1,)]
