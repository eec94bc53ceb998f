"""python3 -m sonde --in-process (SONDE_IN_PROCESS=1): libsonde loaded into the running
interpreter, not a second interpreter under sonde run. The same program must give the same
profile as the default launch: native calls under their Python frames, fork, exec and
subprocess children in the run, os._exit and signal deaths flushed, the program's own output
and exit status, and what a library loaded later calls in libc itself (libsonde rebinds it:
_exit, sigaction, dlopen, pthread_create for the sampler and SONDE_FTZ); where it cannot (-s,
a library loaded before sonde), the launcher says why and starts again as usual. Libraries
loaded after it still find static TLS room, and the CUDA driver starts sonde's GPU side."""
import json
import os
import sqlite3
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import BIN, CLI, clean_env, query, read_only_directory, routine_calls

PY = "/usr/bin/python3"
BUILD = os.environ.get("SONDE_BUILD", "")
PYTHONPATH = os.path.join(BUILD, "python")


def launch(tmp_path, script, *args, in_process=True, db="prof.db", extra=(), **env):
    """python3 -m sonde --in-process|--re-exec|(neither, in_process None) -o DB script args,
    in tmp_path."""
    (tmp_path / "prog.py").write_text(textwrap.dedent(script))
    flags = {True: ["--in-process"], False: ["--re-exec"], None: []}[in_process]
    return subprocess.run([PY, "-m", "sonde", *flags, *extra, "-o", db, "prog.py", *args],
                          env=clean_env(PYTHONPATH=PYTHONPATH, **env), cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)


NUMPY = """\
    import sys
    import numpy as np
    import sonde
    def step(a):
        return a @ a / a.shape[0]

    a = np.ones((64, 64))
    with sonde.region("loop"):
        for _ in range(7):
            a = step(a)
    print("sum", float(a.sum()))
    sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""


def blas_parent(db):
    """(calls, name of the Python frame above) of cblas_dgemm."""
    return query(db, "SELECT SUM(n.calls), pr.name FROM nodes n JOIN routines r USING (routine_id)"
                     " JOIN nodes p ON p.node_id = n.parent_id JOIN routines pr "
                     "ON pr.routine_id = p.routine_id WHERE r.name = 'cblas_dgemm' GROUP BY pr.name")


def test_the_profile_is_the_one_the_default_launch_writes(tmp_path):
    inproc = launch(tmp_path, NUMPY, "3", db="in.db")
    default = launch(tmp_path, NUMPY, "3", in_process=False, db="re.db")
    assert inproc.returncode == default.returncode == 3
    assert inproc.stdout == default.stdout == "sum 4096.0\n"
    assert "sonde: profile written to in.db" in inproc.stderr
    assert "not in-process" not in inproc.stderr
    for db, launch_fact in ((tmp_path / "in.db", [("in-process",)]), (tmp_path / "re.db", [("re-exec",)])):
        assert blas_parent(db) == [(7, "prog.py:4(step)")]
        # sonde.region is the extension's (no Python frame of sonde's), in both launches.
        assert query(db, "SELECT r.kind, SUM(n.calls) FROM nodes n JOIN routines r "
                         "USING (routine_id) WHERE r.name = 'loop'") == [("region", 1)]
        assert query(db, "SELECT COUNT(*) FROM routines WHERE file LIKE '%sonde/__init__.py'") \
            == [(0,)]
        assert query(db, "SELECT value FROM run_info WHERE key = 'sonde.launch'") == launch_fact
        assert query(db, "SELECT origin, end_reason FROM processes") == [("root", "exit")]
        # One interpreter: the command recorded is the one the user typed.
        (command,), = query(db, "SELECT command FROM processes")
        assert command.startswith(f"{PY} -m sonde")


def test_a_torch_training_run_gives_the_same_profile(tmp_path):
    # The reference PyTorch workload: the same native calls (oneDNN and BLAS, through libraries
    # torch loads after sonde) under the same Python frames, and the same output.
    train = Path(os.environ.get("SONDE_SOURCE", Path(__file__).parents[2])) / "examples" / \
        "torch_cnn" / "train.py"
    runs = {}
    for mode, flags in (("in", ["--in-process"]), ("re", [])):
        r = subprocess.run([PY, "-m", "sonde", *flags, "-o", f"{mode}.db", str(train), "--steps",
                            "4", "--eval-every", "2"], env=clean_env(PYTHONPATH=PYTHONPATH),
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs[mode] = r
    assert [l for l in runs["in"].stdout.splitlines() if not l.startswith("time_s")] == \
        [l for l in runs["re"].stdout.splitlines() if not l.startswith("time_s")]
    sql = ("SELECT r.name, pr.name, SUM(n.calls) FROM nodes n JOIN routines r USING (routine_id) "
           "JOIN nodes p ON p.node_id = n.parent_id JOIN routines pr "
           "ON pr.routine_id = p.routine_id WHERE r.kind != 'python' GROUP BY 1, 2 ORDER BY 1, 2")
    native_in = query(tmp_path / "in.db", sql)
    assert native_in == query(tmp_path / "re.db", sql)
    assert any(kind_calls for _, _, kind_calls in native_in)  # oneDNN or BLAS calls were seen


FAMILY = """\
    import multiprocessing as mp, os, subprocess, sys
    import numpy as np

    def work(n):
        a = np.ones((32, 32))
        return float((a @ a).sum()) + n

    if __name__ == "__main__":
        mp.set_start_method("fork")
        with mp.Pool(2) as pool:
            print(pool.map(work, range(2)))
        child = [sys.executable, "-c", "import numpy as np; a = np.ones((8, 8)); a @ a"]
        subprocess.run(child, check=True)
        subprocess.run(child, check=True, env=dict(os.environ, EXTRA="1"))  # an env= of its own
        pid = os.fork()
        if pid == 0:
            work(0)
            os._exit(5)
        print("fork child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        if len(sys.argv) == 1:
            os.execv(sys.executable, [sys.executable, __file__, "again"])
        print("exec image", flush=True)
"""


def family(db):
    rows = query(db, "SELECT process_id, parent_process_id, origin, end_reason FROM processes")
    # A pool worker ends by os._exit or by the pool's SIGTERM, whichever comes first.
    return sorted((origin, parent is not None, "_exit" if reason == "signal 15" else reason)
                  for _, parent, origin, reason in rows)


def test_forks_children_and_execs_join_the_run_as_under_the_default_launch(tmp_path):
    inproc = launch(tmp_path, FAMILY, db="in.db")
    default = launch(tmp_path, FAMILY, in_process=False, db="re.db")
    assert inproc.returncode == default.returncode == 0, inproc.stderr
    assert inproc.stdout == default.stdout
    assert "fork child 5" in inproc.stdout and "exec image" in inproc.stdout
    assert family(tmp_path / "in.db") == family(tmp_path / "re.db")
    got = family(tmp_path / "in.db")
    # Both subprocess children (env= or not), in each of the two images.
    assert got.count(("child", True, "exit")) == 4
    assert ("fork", True, "_exit") in got  # os._exit flushed the fork child
    assert ("root", False, "exec") in got and ("exec", True, "exit") in got
    db = tmp_path / "in.db"
    # Every process's calls are there, in both images: the pool's two tasks, the children's,
    # the fork's.
    assert routine_calls(db, "cblas_dgemm") == 2 * (2 + 2 + 1)
    # os._exit and exec are CPython's own, reaching sonde's wrappers: no frame of sonde's.
    assert query(db, "SELECT COUNT(*) FROM routines WHERE file LIKE '%_in_process.py'") == [(0,)]


SIGNALS = """\
    import os, signal, sys, time
    import numpy as np
    a = np.ones((16, 16)); a @ a
    mode = sys.argv[1]
    if mode == "term":
        os.kill(os.getpid(), signal.SIGTERM)
    elif mode == "handler":
        signal.signal(signal.SIGTERM, lambda s, f: sys.exit(7))
        os.kill(os.getpid(), signal.SIGTERM)
    elif mode == "reset":  # a handler set and put back: the death must still be flushed
        signal.signal(signal.SIGTERM, lambda s, f: None)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
    elif mode == "interrupt":
        raise KeyboardInterrupt
    time.sleep(5)
"""


@pytest.mark.parametrize("mode,status,reason", [
    ("term", -15, "signal 15"), ("handler", 7, "exit"), ("reset", -15, "signal 15"),
    ("interrupt", -2, "signal 2")])
def test_signal_deaths_are_flushed_as_under_the_default_launch(tmp_path, mode, status, reason):
    r = launch(tmp_path, SIGNALS, mode)
    assert r.returncode == status, r.stderr
    db = tmp_path / "prof.db"
    assert query(db, "SELECT end_reason FROM processes") == [(reason,)]
    assert routine_calls(db, "cblas_dgemm") == 1
    assert "sonde: profile written to prof.db" in r.stderr
    default = launch(tmp_path, SIGNALS, mode, in_process=False, db="re.db")
    assert default.returncode in (status, 128 - status)  # sonde run dies of it, or says it
    assert query(tmp_path / "re.db", "SELECT end_reason FROM processes") == [(reason,)]


def test_where_it_cannot_it_says_why_and_starts_again(tmp_path):
    r = launch(tmp_path, NUMPY, extra=["-s", "calls"])
    assert "not in-process (-s prints sonde run's report)" in r.stderr
    assert r.returncode == 0 and "cblas_dgemm" in r.stdout  # the report, from sonde run
    # A library loaded before sonde (here numpy's BLAS, by a sitecustomize) would keep the
    # calls bound before sonde came: the launcher starts the program again under sonde run.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import numpy\n")
    (tmp_path / "prog.py").write_text(textwrap.dedent(NUMPY))
    r = subprocess.run([PY, "-m", "sonde", "--in-process", "-o", "early.db", "prog.py"],
                       env=clean_env(PYTHONPATH=f"{site}:{PYTHONPATH}"), cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr
    assert "not in-process (" in r.stderr and "was loaded before sonde" in r.stderr
    assert blas_parent(tmp_path / "early.db") == [(7, "prog.py:4(step)")]
    assert launch_fact(tmp_path / "early.db") == [("re-exec",)]


def test_an_exec_refused_by_python_is_refused_as_without_sonde(tmp_path):
    # CPython refuses an environment with a NUL in it (ValueError) before any exec: sonde must
    # not hand it a copy cut at the NUL, which it would run (CPython's test_os caught this).
    script = """\
        import os, sys
        argv = [sys.executable, "-c", "print('the new image ran')"]
        for env in ({"FRUIT\\0VEGETABLE": "cabbage"}, {"": "x"}, {"A=B": "x"}):
            try:
                os.execve(argv[0], argv, env)
            except ValueError as e:
                print("refused:", e)
        try:
            os.execv(argv[0], [])
        except ValueError as e:
            print("refused:", e)
        # subprocess's env= and posix_spawn's, joined to the run by sonde's wrappers.
        import subprocess
        for env in ({"FRUIT\\0VEGETABLE": "cabbage"}, {"FRUIT": "orange\\0VEGETABLE=cabbage"}):
            try:
                subprocess.run(argv, env=env)
            except ValueError as e:
                print("refused:", e)
            try:
                os.posix_spawn(argv[0], argv, env)
            except ValueError as e:
                print("refused:", e)
    """
    r = launch(tmp_path, script)
    plain = subprocess.run([PY, "prog.py"], cwd=tmp_path, capture_output=True, text=True,
                           env=clean_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout and r.stdout.count("refused:") == 8
    assert query(tmp_path / "prof.db", "SELECT origin, end_reason FROM processes") == [
        ("root", "exit")]


def test_exit_and_exec_read_their_arguments_and_fail_as_without_sonde(tmp_path):
    # os._exit's status= keyword, its C int (2**32 + 7 is no exit 7), execv's error naming no
    # file (execve's does), posix's functions as os's and os.supports_fd: CPython's own,
    # whose calls into libc reach sonde's wrappers in-process (rebound).
    script = """\
        import os, posix
        print(os.execve in os.supports_fd, posix._exit is os._exit, posix.execv is os.execv)
        for call in ("os._exit(2**32 + 7)", "os._exit(2**70)", "os._exit(1.5)", "os._exit()",
                     "os._exit(1, 2)", "os.execv('/nonexistent', ['x'])",
                     "os.execve('/nonexistent', ['x'], {})"):
            try:
                eval(call)
            except Exception as e:
                print(call, type(e).__name__, e, getattr(e, "filename", None))
        os._exit(status=4)
    """
    r = launch(tmp_path, script)
    plain = subprocess.run([PY, "prog.py"], cwd=tmp_path, capture_output=True, text=True,
                           env=clean_env())
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout) == (4, plain.stdout)
    assert plain.stdout.startswith("True True True\n") and plain.stdout.count("\n") == 8
    assert query(tmp_path / "prof.db", "SELECT origin, end_reason FROM processes") == [
        ("root", "_exit")]


def test_posix_exit_and_exec_called_directly_are_seen(tmp_path):
    # posix._exit and posix.execv are the functions os took at import: a program calling them
    # by that name ended unflushed, or exec'd an image that joined as a stranger.
    script = """\
        import posix, sys
        import numpy as np
        a = np.ones((8, 8))
        for _ in range(5):
            a @ a
        sys.stdout.flush()
        if len(sys.argv) > 1:
            posix.execv(sys.executable, [sys.executable, "-c", "import os; os._exit(6)"])
        posix._exit(5)
    """
    r = launch(tmp_path, script, db="exit.db")
    assert r.returncode == 5, r.stderr
    assert query(tmp_path / "exit.db", "SELECT end_reason FROM processes") == [("_exit",)]
    assert routine_calls(tmp_path / "exit.db", "cblas_dgemm") == 5
    r = launch(tmp_path, script, "exec", db="exec.db")
    assert r.returncode == 6, r.stderr
    assert query(tmp_path / "exec.db", "SELECT origin, end_reason FROM processes ORDER BY "
                                       "process_id") == [("root", "exec"), ("exec", "_exit")]
    assert routine_calls(tmp_path / "exec.db", "cblas_dgemm") == 5


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_children_given_an_environment_of_their_own_join_the_run(tmp_path, in_process):
    # subprocess with env= (its C code execs, through sonde's rebound execve in-process) and
    # os.posix_spawn(p) (glibc's exec inside libc, past the exec wrappers under either launch:
    # sonde's posix_spawn joins the environment) started children without sonde's variables:
    # they ran unprofiled.
    script = """\
        import os, subprocess, sys
        code = "import numpy as np; a = np.ones((8, 8)); a @ a; print('child', flush=True)"
        clean = {"PATH": "/usr/bin:/bin"}
        subprocess.run([sys.executable, "-c", code], env=clean, check=True)
        subprocess.run([sys.executable, "-c", code], env=dict(clean, LD_PRELOAD=""), check=True)
        for spawn in (os.posix_spawn, os.posix_spawnp):
            os.waitpid(spawn(sys.executable, [sys.executable, "-c", code], clean), 0)
    """
    r = launch(tmp_path, script, in_process=in_process)
    assert (r.returncode, r.stdout) == (0, "child\n" * 4), r.stderr
    db = tmp_path / "prof.db"
    [(root_id,)] = query(db, "SELECT process_id FROM processes WHERE origin = 'root'")
    assert query(db, "SELECT origin, parent_process_id, end_reason FROM processes ORDER BY "
                     "origin <> 'root', process_id") == \
        [("root", None, "exit")] + [("child", root_id, "exit")] * 4
    assert routine_calls(db, "cblas_dgemm") == 4


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_the_roots_facts_are_the_runs_though_a_child_wrote_first(tmp_path, in_process):
    # A child that ends within the root's first second is written before it (lower row ids):
    # the run's facts (its BLAS threads in the report's header) are still the root's.
    script = """\
        import os, subprocess, sys
        import numpy as np
        a = np.ones((64, 64)); a @ a
        child = "import numpy as np; a = np.ones((64, 64)); a @ a"
        subprocess.run([sys.executable, "-c", child], check=True,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    """
    r = launch(tmp_path, script, in_process=in_process, OPENBLAS_NUM_THREADS="2")
    assert r.returncode == 0, r.stderr
    db = tmp_path / "prof.db"
    assert query(db, "SELECT p.origin, i.value FROM run_info i JOIN processes p USING "
                     "(process_id) WHERE i.key = 'blas.threads' ORDER BY p.process_id") == \
        [("child", "1"), ("root", "2")]
    rep = subprocess.run([CLI, "report", db, "--format", "json"], capture_output=True, text=True)
    assert rep.returncode == 0, rep.stderr
    assert json.loads(rep.stdout)["run"]["blas_threads"] == 2  # a number, as JSON counts are


def test_an_exec_with_a_mapping_of_its_own_joins_the_run(tmp_path):
    # posix.execve reads keys and values; a mapping whose items() gives lists must be read the
    # same way (reading items() as tuples would have read past them).
    script = """\
        import os, sys

        class Env(dict):
            def items(self):
                return [list(kv) for kv in super().items()]

        code = "import numpy as np; a = np.ones((8, 8)); a @ a; print('new image')"
        os.execve(sys.executable, [sys.executable, "-c", code], Env(os.environ))
    """
    r = launch(tmp_path, script)
    assert r.returncode == 0 and r.stdout == "new image\n", r.stderr
    db = tmp_path / "prof.db"
    assert query(db, "SELECT origin, end_reason FROM processes ORDER BY process_id") == [
        ("root", "exec"), ("exec", "exit")]
    assert routine_calls(db, "cblas_dgemm") == 1


def launch_fact(db):
    return query(db, "SELECT value FROM run_info WHERE key = 'sonde.launch'")


def test_in_process_is_the_default_and_the_environment_chooses_too(tmp_path):
    r = launch(tmp_path, NUMPY, in_process=None)
    assert r.returncode == 0 and "not in-process" not in r.stderr, r.stderr
    assert launch_fact(tmp_path / "prof.db") == [("in-process",)]
    r = launch(tmp_path, NUMPY, in_process=None, db="env1.db", SONDE_IN_PROCESS="1")
    assert r.returncode == 0, r.stderr
    assert launch_fact(tmp_path / "env1.db") == [("in-process",)]
    r = launch(tmp_path, NUMPY, in_process=None, db="env0.db", SONDE_IN_PROCESS="0")
    assert r.returncode == 0, r.stderr
    assert launch_fact(tmp_path / "env0.db") == [("re-exec",)]
    assert blas_parent(tmp_path / "env0.db") == [(7, "prog.py:4(step)")]
    # The command line wins over the environment, as for every option.
    r = launch(tmp_path, NUMPY, in_process=True, db="both.db", SONDE_IN_PROCESS="0")
    assert r.returncode == 0, r.stderr
    assert launch_fact(tmp_path / "both.db") == [("in-process",)]
    r = launch(tmp_path, NUMPY, in_process=None, db="bad.db", SONDE_IN_PROCESS="maybe")
    assert r.returncode == 0 and "SONDE_IN_PROCESS='maybe' is not a boolean" in r.stderr
    assert launch_fact(tmp_path / "bad.db") == [("in-process",)]
    assert blas_parent(tmp_path / "bad.db") == [(7, "prog.py:4(step)")]


def test_by_default_a_refusal_is_a_note_of_the_profile_not_a_line(tmp_path):
    # Not asked for by name, the in-process launch falls back quietly: the run is as the user's
    # program would print it, and the profile says why it was started again.
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import numpy\n")
    (tmp_path / "prog.py").write_text(textwrap.dedent(NUMPY))
    r = subprocess.run([PY, "-m", "sonde", "-o", "early.db", "prog.py"],
                       env=clean_env(PYTHONPATH=f"{site}:{PYTHONPATH}"), cwd=tmp_path,
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 0 and "not in-process" not in r.stderr, r.stderr
    db = tmp_path / "early.db"
    assert launch_fact(db) == [("re-exec",)]
    assert blas_parent(db) == [(7, "prog.py:4(step)")]
    (severity, message), = query(db, "SELECT severity, message FROM notes WHERE topic = 'launch'")
    assert severity == "info" and "not in-process" in message and "before sonde" in message
    report = subprocess.run([CLI, "report", str(db)], capture_output=True, text=True, timeout=60)
    assert "note: python3 -m sonde started the program again" in report.stdout
    # -s is sonde run's report by design: no note for it.
    r = launch(tmp_path, NUMPY, in_process=None, db="s.db", extra=["-s", "calls"])
    assert r.returncode == 0 and "not in-process" not in r.stderr, r.stderr
    assert query(tmp_path / "s.db", "SELECT COUNT(*) FROM notes WHERE topic = 'launch'") == [(0,)]


def test_an_existing_output_is_refused_as_sonde_run_refuses_it(tmp_path):
    (tmp_path / "prof.db").write_text("keep me")
    r = launch(tmp_path, NUMPY)
    assert r.returncode != 0 and \
        "prof.db already exists and is not a sonde profile; use --force" in r.stderr
    assert r.stdout == ""  # the program never ran
    assert (tmp_path / "prof.db").read_text() == "keep me"
    r = launch(tmp_path, NUMPY, extra=["--force"])
    assert r.returncode == 0 and blas_parent(tmp_path / "prof.db") == [(7, "prog.py:4(step)")]


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_a_directory_as_output_is_said_at_once(tmp_path, in_process):
    # It read "out already exists and is not a sonde profile; use --force", and with --force
    # "out is a directory" (a red-team find).
    (tmp_path / "out").mkdir()
    for extra in ([], ["--force"]):
        r = launch(tmp_path, NUMPY, in_process=in_process, db="out", extra=extra)
        assert r.returncode != 0 and r.stdout == "", r.stderr
        assert "out is a directory: name the profile's file (say, out/prof.db)" in r.stderr, \
            r.stderr
        assert "not a sonde profile" not in r.stderr, r.stderr


@pytest.mark.parametrize("target", ["python", "sh"])
def test_a_program_that_execs_still_says_where_the_profile_went(tmp_path, target):
    # In-process, libsonde's image says the last line; an exec replaced it, and the run ended
    # without one (a red-team run), where --re-exec and sonde run say it. The new image says it.
    script = """\
        import os, sys
        if len(sys.argv) < 2:
            print("first", flush=True)
            if sys.argv[0] and "{target}" == "python":
                os.execv(sys.executable, [sys.executable, sys.argv[0], "again"])
            os.execv("/bin/sh", ["sh", "-c", "echo echoed"])  # (coreutils' echo closes stderr)
        print("again", sys.argv[1:])
    """.replace("{target}", target)
    r = launch(tmp_path, script, in_process=None)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ("first\nagain ['again']\n" if target == "python" else "first\nechoed\n")
    said = [l for l in r.stderr.splitlines() if l.startswith("sonde:")]
    assert said == ["sonde: profile written to prof.db"], r.stderr
    images = query(tmp_path / "prof.db", "SELECT origin, ended_ns IS NOT NULL FROM processes "
                                         "ORDER BY process_id")
    assert images == [("root", 1), ("exec", 1)], images


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_an_output_that_names_the_script_or_its_input_is_refused_even_with_force(
        tmp_path, in_process):
    # --force replaced the script before it ran: it became a profile, and the run failed on its
    # NUL bytes (a red-team run). Without --force an input profile was set aside as .old.
    (tmp_path / "data.db").write_text("the program's input")
    for db, extra in (("prog.py", ["--force"]), ("./data.db", ["--force"]), ("data.db", [])):
        r = launch(tmp_path, NUMPY, "0", "data.db", in_process=in_process, db=db, extra=extra)
        assert r.returncode == 2 and r.stdout == "", (db, r.stderr)
        given = "data.db" if "data" in db else "prog.py"
        assert f"-o {db} names a file the command was given ({given}): the profile would " \
            "replace it before the command runs; give it another name" in r.stderr, r.stderr
        assert (tmp_path / "prog.py").read_text() == textwrap.dedent(NUMPY)
        assert (tmp_path / "data.db").read_text() == "the program's input"
        assert not (tmp_path / "data.db.old").exists()
    r = launch(tmp_path, NUMPY, "0", "data.db", in_process=in_process, db="out.db")
    assert r.returncode == 0 and r.stdout == "sum 4096.0\n", r.stderr


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_a_read_only_output_directory_is_refused_with_its_reason(tmp_path, in_process):
    with read_only_directory(tmp_path) as ro:
        r = launch(tmp_path, NUMPY, in_process=in_process, db="ro/prof.db")
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert f"cannot write to output directory {ro}: Read-only file system" in r.stderr, r.stderr


def test_a_library_loaded_later_still_finds_static_tls_room(tmp_path):
    # libsonde's hot thread-locals are initial-exec, so its whole TLS block takes static TLS:
    # loaded in-process it must leave what glibc keeps spare to libgomp and the like.
    lib = BIN / "libstatic_tls.so"
    script = f"""\
        import ctypes, os
        print("touched", ctypes.CDLL({str(lib)!r}, mode=os.RTLD_GLOBAL).static_tls_touch())
    """
    r = launch(tmp_path, script)
    assert r.returncode == 0 and r.stdout == "touched 1\n", r.stderr


CALLS_LIBC = BIN / "libcalls_libc.so"  # tests/e2e/programs/calls_libc.c

LIBC_FROM_C = f"""\
    import ctypes, os, signal, sys
    import numpy as np
    a = np.ones((8, 8)); a @ a
    lib = ctypes.CDLL({str(CALLS_LIBC)!r})  # loaded after sonde, as a C extension would be
    if sys.argv[1] == "exit":
        print("child ended", lib.fork_child_exits(3), flush=True)
    elif sys.argv[1] == "dlopen":
        print("answer", lib.answer_beside(), flush=True)
    else:
        print("reads back the default", lib.term_to_default(), flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
"""


def test_a_librarys_own_exit_in_a_fork_child_is_flushed(tmp_path):
    # libc's _exit called from C in a fork child (as torch's DataLoader workers end) passed
    # sonde in-process: the child was missing from the profile. Now rebound as under preload.
    ended = {}
    for in_process in (True, False):
        db = f"{in_process}.db"
        r = launch(tmp_path, LIBC_FROM_C, "exit", in_process=in_process, db=db)
        assert (r.returncode, r.stdout) == (0, "child ended 3\n"), r.stderr
        ended[in_process] = sorted(query(tmp_path / db, "SELECT origin, end_reason FROM processes"))
    assert ended[True] == ended[False] == [("fork", "_exit"), ("root", "exit")]


def test_a_librarys_own_sigaction_keeps_sondes_handler_underneath(tmp_path):
    # A library loaded after sonde sets SIGTERM to its default with sigaction: it reads back
    # its own disposition, and the death is still flushed by sonde's handler beneath it.
    for in_process in (True, False):
        db = f"{in_process}.db"
        r = launch(tmp_path, LIBC_FROM_C, "term", in_process=in_process, db=db)
        assert r.stdout == "reads back the default 1\n", r.stderr
        assert r.returncode in (-15, 128 + 15), r.stderr  # sonde run says the signal
        assert query(tmp_path / db, "SELECT end_reason FROM processes") == [("signal 15",)]
        assert routine_calls(tmp_path / db, "cblas_dgemm") == 1


def test_a_librarys_dlopen_keeps_its_own_runpath(tmp_path):
    # sonde's dlopen wrapper rebinds what a dlopen loaded before the caller gets it back, yet
    # glibc must still see the caller (its RUNPATH, $ORIGIN/origin_lib, finds the library).
    r = launch(tmp_path, LIBC_FROM_C, "dlopen")
    assert (r.returncode, r.stdout) == (0, "answer 42\n"), r.stderr
    assert query(tmp_path / "prof.db", "SELECT COUNT(*) FROM notes WHERE topic = 'rebind'") \
        == [(0,)]


SPINNER = """\
    import threading, time
    def spin():
        # The clock is read once per 10,000 additions: reading it is a system call, kernel time
        # the sampler (user time only) does not see, and on some kernels most of such a loop.
        x = 0
        while time.thread_time() < 0.4:
            for i in range(10000):
                x += i
    t = threading.Thread(target=spin)
    t.start()
    t.join()
    print("spun")
"""


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_the_sampler_arms_threads_started_after_sonde(tmp_path, in_process):
    # The sampler arms each thread as pthread_create starts it: in-process that is CPython's
    # own pthread_create, rebound, so the launcher no longer falls back to sonde run for it.
    r = launch(tmp_path, SPINNER, in_process=in_process, extra=["--sample", "1000"])
    assert (r.returncode, r.stdout) == (0, "spun\n"), r.stderr
    assert "not in-process" not in r.stderr
    db = tmp_path / "prof.db"
    launched = [("in-process",)] if in_process else [("re-exec",)]
    assert query(db, "SELECT value FROM run_info WHERE key = 'sonde.launch'") == launched
    assert query(db, "SELECT value FROM run_info WHERE key = 'sample.hz'") == [("1000",)]
    (spinner,), = query(db, "SELECT SUM(s.count) FROM samples s JOIN nodes n USING (node_id) "
                            "JOIN threads t USING (thread_id) WHERE t.seq > 0")
    assert spinner is not None and spinner >= 100  # 0.4 s of CPU at 1 kHz


POOL = """\
    import time
    import numpy as np  # OpenBLAS starts its thread pool in its constructor, inside the dlopen
    a = np.random.rand(600, 600)
    t = time.time()
    while time.time() - t < 1.0:
        a @ a
    print("multiplied")
"""


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_the_sampler_arms_a_pool_a_constructor_started(tmp_path, in_process):
    # In-process, OpenBLAS's constructor runs inside the dlopen, before sonde rebinds its
    # pthread_create: the worker is armed after that dlopen, as a thread started before sonde
    # is (it had no samples; under the re-exec it had as many as the main thread).
    r = launch(tmp_path, POOL, in_process=in_process, extra=["--sample", "1000"],
               OPENBLAS_NUM_THREADS="2")
    assert (r.returncode, r.stdout) == (0, "multiplied\n"), r.stderr
    per_thread = query(tmp_path / "prof.db", "SELECT t.seq, SUM(s.count) FROM samples s JOIN "
                                             "nodes n USING (node_id) JOIN threads t "
                                             "USING (thread_id) GROUP BY t.seq")
    assert [seq for seq, _ in per_thread] == [0, 1], per_thread  # sonde's flusher is not one
    assert all(count >= 100 for _, count in per_thread), per_thread


SUBNORMAL = """\
    import sys, threading
    tiny = float(sys.argv[1])  # 1e-310, a subnormal: read by the FPU as 0 under DAZ
    products = []
    t = threading.Thread(target=lambda: products.append(tiny * 1.0))
    t.start()
    t.join()
    print("main", tiny * 1.0, "thread", products[0])
"""


def test_sonde_ftz_sets_the_fpu_mode_of_threads_started_after_sonde(tmp_path):
    # SONDE_FTZ sets FTZ/DAZ on each thread as pthread_create starts it: in-process too now.
    r = launch(tmp_path, SUBNORMAL, "1e-310", SONDE_FTZ="1")
    assert (r.returncode, r.stdout) == (0, "main 0.0 thread 0.0\n"), r.stderr
    assert "not in-process" not in r.stderr
    assert query(tmp_path / "prof.db", "SELECT value FROM run_info WHERE key = "
                                       "'sonde.launch'") == [("in-process",)]
    plain = launch(tmp_path, SUBNORMAL, "1e-310", db="plain.db")
    assert plain.stdout == "main 1e-310 thread 1e-310\n", plain.stderr


DATALOADER = """\
    import sys
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Products(Dataset):
        def __len__(self):
            return 1000
        def __getitem__(self, i):
            a = torch.ones(8, 8)
            return (a @ a).sum()

    torch.set_num_threads(1)
    batches = iter(DataLoader(Products(), batch_size=4, num_workers=2))
    for _ in range(3):
        next(batches)
    print("three batches", flush=True)
    # The workers are still running: at exit multiprocessing terminates them (SIGTERM), and
    # torch's C handler in each ends it by libc's _exit(0).
"""


def test_dataloader_workers_ended_by_torchs_handler_are_flushed(tmp_path):
    pytest.importorskip("torch")
    ended = {}
    for in_process in (True, False):
        db = f"{in_process}.db"
        r = launch(tmp_path, DATALOADER, in_process=in_process, db=db)
        assert (r.returncode, r.stdout) == (0, "three batches\n"), r.stderr
        ended[in_process] = sorted(query(tmp_path / db, "SELECT origin, end_reason FROM processes"))
    assert ended[True] == ended[False] == [("fork", "_exit"), ("fork", "_exit"), ("root", "exit")]


STUBS = os.environ.get("SONDE_CUPTI_STUBS", "")


@pytest.mark.skipif(not STUBS, reason="no CUPTI headers at configure time: no stub CUPTI")
def test_the_cuda_driver_opened_in_process_starts_cupti(tmp_path):
    # ctypes' dlopen of the driver reaches sonde's wrapper (rebound in-process), which starts
    # CUPTI as under LD_PRELOAD; the launcher also names libsonde in CUDA_INJECTION64_PATH, for
    # a driver loaded past the wrapper, whose cuInit then starts it (the stub driver calls it).
    script = f"""\
        import ctypes, os
        driver = ctypes.CDLL("libcuda.so.1", mode=os.RTLD_GLOBAL)
        cupti = ctypes.CDLL({str(Path(STUBS) / "libcupti.so.13")!r})

        def launch():
            slot = ctypes.c_uint64(0)
            for enter in (1, 0):  # cuLaunchKernel (driver domain 1, cbid 307), correlation 7
                cupti.cupti_stub_api(1, 307, 7, None, enter, ctypes.byref(slot))
            cupti.cupti_stub_now.restype = ctypes.c_uint64
            t = cupti.cupti_stub_now()
            cupti.cupti_stub_kernel(7, b"_Z4stepv", ctypes.c_uint64(t),
                                    ctypes.c_uint64(t + 2_000_000), 8, 64, 16)

        print("cuInit", driver.cuInit(0))
        launch()
    """
    env = dict(LD_LIBRARY_PATH=str(Path(STUBS) / "driver"),
               SONDE_CUPTI_LIBRARY=str(Path(STUBS) / "libcupti.so.13"))
    r = launch(tmp_path, script, **env)
    assert r.returncode == 0 and "cuInit 0" in r.stdout, r.stderr
    db = tmp_path / "prof.db"
    kernels = query(db, "SELECT g.name, r.name, pr.name FROM gpu_activity g "
                        "JOIN nodes n USING (node_id) JOIN routines r USING (routine_id) "
                        "JOIN nodes p ON p.node_id = n.parent_id "
                        "JOIN routines pr ON pr.routine_id = p.routine_id")
    assert kernels == [("step()", "cuLaunchKernel", "prog.py:5(launch)")]
    assert query(db, "SELECT COUNT(*) FROM notes WHERE topic = 'gpu'") == [(0,)]
    # Another tool named in CUDA_INJECTION64_PATH keeps CUPTI, as under LD_PRELOAD, and the
    # profile says what is missing.
    r = launch(tmp_path, script, db="other.db",
               CUDA_INJECTION64_PATH="/nonexistent/libToolsInjection64.so", **env)
    assert r.returncode == 0, r.stderr
    other = tmp_path / "other.db"
    assert query(other, "SELECT COUNT(*) FROM gpu_activity") == [(0,)]
    (note,), = query(other, "SELECT message FROM notes WHERE topic = 'gpu'")
    assert "CUDA_INJECTION64_PATH names another tool" in note and "not recorded" in note


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_profile_edit_profile_again_keeps_the_previous_as_old(tmp_path, in_process):
    """As perf keeps perf.data.old: the second run runs, the first profile is prof.db.old, and
    a third replaces that .old (never the newest), each said in one line."""
    first = launch(tmp_path, "def f():\n    pass\nf()\nprint('one')\n", in_process=in_process)
    assert first.returncode == 0 and first.stdout == "one\n", first.stderr
    assert "kept the previous" not in first.stderr
    second = launch(tmp_path, "def g():\n    pass\ng()\ng()\nprint('two')\n",
                    in_process=in_process)
    assert second.returncode == 0 and second.stdout == "two\n", second.stderr
    assert "sonde: kept the previous profile prof.db as prof.db.old" in second.stderr
    names = lambda db: {n.split("(")[-1].rstrip(")")
                        for (n,) in query(db, "SELECT name FROM routines WHERE kind = 'python'")}
    assert "f" in names(tmp_path / "prof.db.old") and "g" not in names(tmp_path / "prof.db.old")
    assert "g" in names(tmp_path / "prof.db") and "f" not in names(tmp_path / "prof.db")
    third = launch(tmp_path, "def h():\n    pass\nh()\n", in_process=in_process)
    assert third.returncode == 0, third.stderr
    assert "g" in names(tmp_path / "prof.db.old") and "h" in names(tmp_path / "prof.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prof.db", "prof.db.old", "prog.py"]


def test_a_previous_profile_of_any_name_is_kept(tmp_path):
    """A name with a URI's own characters (?, #, %), a space and a byte that is not UTF-8 is
    read as the profile it is and kept as .old, as any other: the launcher opens it by a file:
    URI of its own making (urllib.parse.quote refused the byte, and "not a sonde profile"
    followed)."""
    name = os.fsdecode(b"p r?o#f%25\xff.db")
    (tmp_path / "prog.py").write_text("def f():\n    pass\nf()\n")
    for _ in range(2):
        r = subprocess.run([PY, "-m", "sonde", "-o", name, "prog.py"], cwd=tmp_path,
                           env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True,
                           timeout=180)
        assert r.returncode == 0, r.stderr
    assert b"kept the previous profile" in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == sorted([name, name + ".old", "prog.py"])
    for db in (name, name + ".old"):
        con = sqlite3.connect(os.fsencode(tmp_path / db))
        try:
            assert con.execute("SELECT COUNT(*) FROM routines WHERE kind = 'python' AND name "
                               "LIKE '%(f)'").fetchall() == [(1,)]
        finally:
            con.close()


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_a_profile_no_process_wrote_yet_stays_where_it_is(tmp_path, in_process):
    """Another run's claim of the name before its first flush (a profile without a process
    row): moved to .old, that run's first flush would open prof.db by name and write into this
    run's file. It stays, byte for byte, and this run writes beside it."""
    first = launch(tmp_path, "def f():\n    pass\nf()\n", in_process=in_process)
    assert first.returncode == 0, first.stderr
    con = sqlite3.connect(tmp_path / "prof.db")
    for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                "name NOT IN ('meta', 'sqlite_sequence')").fetchall():
        con.execute(f'DELETE FROM "{table}"')
    con.commit()
    con.close()
    claimed = (tmp_path / "prof.db").read_bytes()
    second = launch(tmp_path, "def g():\n    pass\ng()\nprint('two')\n", in_process=in_process)
    assert second.returncode == 0 and second.stdout == "two\n", second.stderr
    assert "prof.db holds no process yet" in second.stderr, second.stderr
    assert (tmp_path / "prof.db").read_bytes() == claimed
    beside = [p for p in tmp_path.iterdir() if p.name not in ("prof.db", "prog.py")]
    assert len(beside) == 1 and beside[0].name.startswith("prof.") and beside[0].suffix == ".db"
    assert any(n.endswith("(g)") for (n,) in query(beside[0], "SELECT name FROM routines"))
    # Made 5 minutes ago: a dead run's, not a run "started into it a moment ago" (a red team's
    # blank file, left by a run killed in its first second, sent every later run beside it so).
    made = time.time() - 300
    os.utime(tmp_path / "prof.db", (made, made))
    third = launch(tmp_path, "print('three')\n", in_process=in_process)
    assert third.returncode == 0 and third.stdout == "three\n", third.stderr
    assert "prof.db holds no process yet, 5 min after it was made (a run killed before its " \
        "first flush" in third.stderr and "remove it, or use --force" in third.stderr, \
        third.stderr


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "re-exec"])
def test_a_killed_writers_pid_held_by_a_later_process_does_not_block(tmp_path, in_process):
    """A run killed by SIGKILL leaves its process unfinished (ended_ns NULL); once its pid is
    another process's, started later, the profile is no longer being written: kept as .old,
    not refused with "still being written by process N". The same pid given the writer's own
    start time still refuses."""
    first = launch(tmp_path, "def f():\n    pass\nf()\n", in_process=in_process)
    assert first.returncode == 0, first.stderr
    other = subprocess.Popen(["sleep", "30"])  # started after the row's writer: another process
    try:
        con = sqlite3.connect(tmp_path / "prof.db")
        hour_ago = time.time_ns() - 3600 * 10**9
        con.execute("UPDATE processes SET pid = ?, ended_ns = NULL, end_reason = NULL, "
                    "started_ns = ?", (other.pid, hour_ago))
        con.commit()
        con.close()
        second = launch(tmp_path, "def g():\n    pass\ng()\n", in_process=in_process)
        assert second.returncode == 0, second.stderr
        assert "sonde: kept the previous profile prof.db as prof.db.old" in second.stderr, \
            second.stderr
        # Written by that very process (its start before the row's): still refused.
        con = sqlite3.connect(tmp_path / "prof.db")
        con.execute("UPDATE processes SET pid = ?, ended_ns = NULL, end_reason = NULL, "
                    "started_ns = ?", (other.pid, time.time_ns()))
        con.commit()
        con.close()
        third = launch(tmp_path, "def h():\n    pass\nh()\n", in_process=in_process)
        assert third.returncode != 0 and \
            f"still being written by process {other.pid}" in third.stderr, third.stderr
    finally:
        other.kill()
        other.wait()


def test_an_empty_output_name_is_a_usage_error(tmp_path):
    """`-o $OUT` of an unset variable: one line, exit 2, nothing run (it read "is a directory:
    name the profile's file (say, /prof.db)")."""
    (tmp_path / "prog.py").write_text("print('ran')\n")
    r = subprocess.run([PY, "-m", "sonde", "-o", "", "prog.py"], cwd=tmp_path,
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr == "python3 -m sonde: -o names no file (an empty value): name the " \
                       "profile's file\n", r.stderr
