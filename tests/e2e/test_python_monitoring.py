"""`python3.12 -m sonde` and 3.13: Python frames through sys.monitoring (PEP 669).

Runs where pyenv has a CPython 3.12 or later and the build made the extension for it
(python_hook/CMakeLists.txt builds one per such interpreter, SONDE_EXTRA_PYTHONS); skips with
the reason otherwise. These interpreters have no numpy: the programs are pure Python."""
import os
import sqlite3
import subprocess
import textwrap
import time

import pytest

from conftest import CLI, LIB, clean_env, integrity_ok, query
from test_python import (COUNTED, PYTHONPATH, other_pythons, python_calls, python_params,
                         tree_is_consistent)


def interpreters():
    """(python, why-not) for each CPython 3.12+ found; why-not is None where it can run."""
    return other_pythons(range(12, 20))


FOUND = interpreters()
PYTHONS = python_params(FOUND) or [
    pytest.param(None, id="none", marks=pytest.mark.skip(
        reason="no CPython 3.12+ here (~/.pyenv/versions/3.12*/bin/python3.12)"))]
MODES = ["default", "builtins"]


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


def sonde_py(py, args, db, tmp_path, mode="default", **env):
    opts = ["--builtins"] if mode == "builtins" else []
    return subprocess.run([py, "-m", "sonde", "-o", str(db), *opts, *map(str, args)],
                          env=clean_env(PYTHONPATH=PYTHONPATH, **env), capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)


def plain_py(py, args, tmp_path):
    return subprocess.run([py, *map(str, args)], env=clean_env(), capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)


def killed_after_lines(procs, n):
    """Each process's first `n` lines of stdout, then (a second later: two flush intervals of
    0.5 s) SIGKILL: [(lines, stderr)] per process. What a profile keeps is what was flushed."""
    outs = []
    for p in procs:
        lines = [p.stdout.readline() for _ in range(n)]
        time.sleep(1.0)
        p.kill()
        outs.append((lines, p.stderr.read()))
        p.wait()
    return outs


def path_calls(db, path):
    return query(db, "SELECT COALESCE(SUM(calls), 0) FROM callpaths WHERE path = ?",
                 (path,))[0][0]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("py", PYTHONS)
def test_call_counts_are_exact_through_sys_monitoring(db, tmp_path, py, mode):
    path = script(tmp_path, "counted.py", COUNTED + """
    import sys
    print(sys.monitoring.get_tool(4), file=sys.stderr)
    """)
    r = sonde_py(py, [path], db, tmp_path, mode=mode)
    assert r.returncode == 0, r.stderr
    # The hook that recorded is sys.monitoring's; then the launcher's last line.
    assert r.stderr == f"sonde\nsonde: profile written to {db}\n"
    assert r.stdout == plain_py(py, [path], tmp_path).stdout
    for function, n in eval(r.stdout).items():
        assert python_calls(db, function) == n, function
    assert python_calls(db, "main") == 1
    assert tree_is_consistent(db) and integrity_ok(db)
    # The tree starts at the program's <module>; the worker threads' at Thread's methods.
    paths = {p for (p,) in query(db, "SELECT path FROM callpaths")}
    assert any(p.startswith("counted.py:1(<module>);") and p.endswith("(main)")
               and p.count(";") == 1 for p in paths), sorted(paths)[:10]
    assert any(p.endswith("(work)") and "threading.py" in p.split(";")[0] for p in paths), paths
    # The launcher's exec (a C function, seen with builtins) is skipped.
    assert not any(p.startswith("<built-in builtins.exec>") for p in paths)


@pytest.mark.parametrize("py", PYTHONS)
def test_builtins_mode_records_c_functions_under_their_callers(db, tmp_path, py):
    path = script(tmp_path, "cfuncs.py", """
        import math

        def key(x):
            return -x

        def main():
            items = []
            for i in range(100):
                items.append(i)          # a method descriptor called with its object
            n = 0
            for _ in range(30):
                n += len(items)
            for _ in range(7):
                sorted(items, key=key)   # calls back into Python 100 times each
            for x in (4.0, -1.0, 9.0):
                try:
                    math.sqrt(x)         # raises once: C_RAISE closes it
                except ValueError:
                    pass
            print(n)

        main()
    """)
    r = sonde_py(py, [path], db, tmp_path, mode="builtins")
    assert (r.returncode, r.stdout) == (0, "3000\n"), r.stderr
    # (importlib, run by the program's imports, calls some of them too: counted by path.)
    main = "cfuncs.py:1(<module>);cfuncs.py:7(main);"
    assert path_calls(db, main + "<built-in builtins.len>") == 30
    assert path_calls(db, main + "<built-in builtins.sorted>") == 7
    assert path_calls(db, main + "<built-in list.append>") == 100
    assert path_calls(db, main + "<built-in math.sqrt>") == 3
    assert path_calls(db, main + "<built-in builtins.sorted>;cfuncs.py:4(key)") == 700
    assert python_calls(db, "key") == 700
    assert tree_is_consistent(db)
    # The default records Python frames only.
    db.unlink()
    assert sonde_py(py, [path], db, tmp_path).returncode == 0
    assert query(db, "SELECT COUNT(*) FROM routines WHERE kind = 'builtin'") == [(0,)]
    assert python_calls(db, "key") == 700


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("py", PYTHONS)
def test_generators_and_coroutines_count_one_call_each(db, tmp_path, py, mode):
    path = script(tmp_path, "gens.py", """
        import asyncio

        calls = {"g": 0, "h": 0, "leaf": 0, "sub_gen": 0, "outer": 0, "fetch": 0, "agen": 0,
                 "sub_ret": 0, "outer_ret": 0, "thrower": 0}

        def g():
            calls["g"] += 1
            yield 1
            yield 2

        def h():
            calls["h"] += 1
            for i in range(3):
                leaf()
                yield i

        def leaf():
            calls["leaf"] += 1

        def sub_gen():
            calls["sub_gen"] += 1
            try:
                yield 1
            except KeyError:
                raise ValueError("inner")

        def outer():
            calls["outer"] += 1
            try:
                yield from sub_gen()
            except ValueError:
                yield 2

        def sub_ret():
            calls["sub_ret"] += 1
            try:
                yield 1
            except KeyError:
                return 5          # outer_ret goes on from the StopIteration

        def outer_ret():
            calls["outer_ret"] += 1
            v = yield from sub_ret()
            yield v
            yield v + 1

        def thrower(it):
            calls["thrower"] += 1
            return it.throw(KeyError("y"))

        async def fetch(i):
            calls["fetch"] += 1
            await asyncio.sleep(0)
            if i % 3 == 0:
                raise KeyError(i)
            return i

        async def agen(n):
            calls["agen"] += 1
            for i in range(n):
                await asyncio.sleep(0)
                yield i

        async def run():
            await asyncio.gather(*[fetch(i) for i in range(12)], return_exceptions=True)
            return [x async for x in agen(4)]

        def main():
            for _ in range(10):
                it = g()
                next(it)
                del it                    # close(): PY_THROW, PY_UNWIND
            it = h()
            next(it)
            sum(it)                       # resumed under another call
            for _ in range(5):
                it = outer()
                next(it)
                it.throw(KeyError("x"))   # delegated to sub_gen, which raises into outer
                it.close()
            for _ in range(5):
                it = outer_ret()
                next(it)
                assert thrower(it) == 5 and next(it) == 6
                it.close()
            asyncio.run(run())
            print(calls)

        main()
    """)
    r = sonde_py(py, [path], db, tmp_path, mode=mode)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain_py(py, [path], tmp_path).stdout
    for function, n in eval(r.stdout).items():
        assert python_calls(db, function) == n, function
    assert python_calls(db, "main") == 1
    assert tree_is_consistent(db)
    assert query(db, "SELECT COUNT(*) FROM nodes WHERE depth > 0 AND parent_id NOT IN "
                     "(SELECT node_id FROM nodes)") == [(0,)]


@pytest.mark.parametrize("py", PYTHONS)
def test_exceptions_and_early_returns_keep_the_tree(db, tmp_path, py):
    path = script(tmp_path, "exc.py", """
        calls = {"deep": 0, "early": 0, "catcher": 0}

        def deep(n):
            calls["deep"] += 1
            if n == 0:
                raise RuntimeError("bottom")
            return deep(n - 1)

        def early(i):
            calls["early"] += 1
            for j in range(10):
                if j == i:
                    return j
            return -1

        def catcher():
            calls["catcher"] += 1
            try:
                deep(20)
            except RuntimeError:
                return early(3)

        for _ in range(50):
            catcher()
        try:
            deep(5)                 # unwinds out of <module> into the launcher
        finally:
            print(calls)
    """)
    r = sonde_py(py, [path], db, tmp_path)
    assert r.returncode == 1 and "RuntimeError: bottom" in r.stderr
    for function, n in eval(r.stdout).items():
        assert python_calls(db, function) == n, function
    assert tree_is_consistent(db) and integrity_ok(db)
    # deep(20) .. deep(0) under catcher(), early() beside them, not under them once unwound.
    def depth(function):
        return query(db, "SELECT MAX(n.depth) FROM nodes n JOIN routines r USING (routine_id) "
                         "WHERE r.name LIKE ?", (f"%({function})",))[0][0]
    assert depth("deep") == depth("catcher") + 21
    assert depth("early") == depth("catcher") + 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("py", PYTHONS)
def test_start_and_stop_from_the_program_and_a_held_tool_id(db, tmp_path, py, mode):
    # Frames running at start() return without having been entered; stop() gives the tool id
    # back; a tool id held by another tool means the profile function, after one line.
    path = script(tmp_path, "api.py", """
        import sys, threading
        import sonde

        calls = {"work": 0, "leaf": 0, "after": 0}

        def leaf():
            calls["leaf"] += 1

        def work():
            calls["work"] += 1
            leaf()

        def after():
            calls["after"] += 1

        go = threading.Event()

        def early():
            go.wait()
            for _ in range(50):
                work()

        if sys.argv[2] == "held":
            sys.monitoring.use_tool_id(4, "other")
        t = threading.Thread(target=early)
        t.start()
        before = dict(calls)
        print(sonde.start(builtins=sys.argv[1] == "builtins"))
        go.set()
        t.join()
        for _ in range(20):
            work()
        during = {k: calls[k] - before[k] for k in calls}
        sonde.stop()
        for _ in range(7):
            work()
            after()
        print(during, sys.monitoring.get_tool(4))
    """)
    env = clean_env(PYTHONPATH=PYTHONPATH, LD_PRELOAD=os.environ["SONDE_LIB"])
    for held in ("free", "held"):
        e = dict(env, SONDE_OUTPUT=str(tmp_path / f"{held}.db"))
        r = subprocess.run([py, str(path), mode, held], env=e, capture_output=True, text=True,
                           timeout=300, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        hook, during = r.stdout.splitlines()
        if held == "free":
            assert (hook, r.stderr) == ("monitoring", "")
            assert during == "{'work': 70, 'leaf': 70, 'after': 0} None"
        else:
            assert hook == "profile"
            assert r.stderr == ("sonde: sys.monitoring tool id 4 is held by 'other'; recording "
                                "Python frames through the profile function instead\n")
            assert during == "{'work': 70, 'leaf': 70, 'after': 0} other"
        out = tmp_path / f"{held}.db"
        for function, n in (("work", 70), ("leaf", 70), ("after", 0), ("early", 0)):
            assert python_calls(out, function) == n, (held, function)
        assert tree_is_consistent(out)


@pytest.mark.parametrize("py", PYTHONS)
def test_deep_recursion_and_line_costs(db, tmp_path, py):
    path = script(tmp_path, "deep.py", """
        import sys
        sys.setrecursionlimit(1_000_000)

        def down(n):
            return 0 if n == 0 else 1 + down(n - 1)

        def hot(n):
            total = 0
            for i in range(n):
                total += i
            return total

        print(down(100_000), down(10), hot(40))
    """)
    r = sonde_py(py, ["--lines", "hot", path], db, tmp_path)
    assert (r.returncode, r.stdout) == (0, "100000 10 780\n"), r.stderr
    assert integrity_ok(db) and tree_is_consistent(db)
    # Frames beyond SONDE_MAX_DEPTH are not recorded; down(10) after the deep one is, whole.
    assert query(db, "SELECT COUNT(*) FROM nodes n JOIN routines r USING (routine_id) "
                     "WHERE r.name LIKE '%(down)' AND n.calls = 2")[0][0] >= 1
    # The settrace-based line timing works on 3.12+ too.
    hits = dict(query(db, "SELECT l.line, SUM(l.hits) FROM line_costs l JOIN routines r "
                          "USING (routine_id) WHERE r.name LIKE '%(hot)' GROUP BY l.line"))
    assert hits[9] == 1 and hits[11] == 40 and hits[12] == 1, hits


@pytest.mark.parametrize("py", PYTHONS)
def test_fork_children_keep_the_hook(db, tmp_path, py):
    path = script(tmp_path, "forks.py", """
        import os

        def child_work():
            return sum(range(1000))

        def main():
            pids = []
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    child_work()
                    os._exit(0)
                pids.append(pid)
            for pid in pids:
                os.waitpid(pid, 0)

        main()
    """)
    r = sonde_py(py, [path], db, tmp_path)
    assert r.returncode == 0, r.stderr
    rows = query(db, "SELECT p.origin, SUM(n.calls) FROM processes p JOIN threads t "
                     "USING (process_id) JOIN nodes n USING (thread_id) JOIN routines r "
                     "USING (routine_id) WHERE r.name LIKE '%(child_work)' GROUP BY p.process_id")
    assert rows == [("fork", 1), ("fork", 1)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("py", PYTHONS)
def test_a_fork_warns_as_without_sonde(db, tmp_path, py, mode):
    # 3.12+ warn at os.fork in a process of more than one thread, native ones counted: sonde's
    # flusher made every forking program warn (stderr, and warnings.catch_warnings saw it), and
    # multiprocessing's fork start method too. os.fork and os.forkpty now run without it; the
    # children are recorded, and the parent's flushes go on after the fork.
    path = script(tmp_path, "forkwarn.py", """
        import multiprocessing as mp
        import os
        import time
        import warnings

        def square(x):
            return x * x

        def parent_after():
            return sum(range(100))

        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        print("caught:", [str(w.message)[:30] for w in seen])
        with mp.get_context("fork").Pool(2) as pool:
            print(sum(pool.map(square, range(10))))
        print(os.fork.__name__, os.fork is __import__("posix").fork)
        parent_after()
        time.sleep(1.5)  # a periodic flush of the parent, by the flusher started again
        print("after", flush=True)
        time.sleep(60)  # ended by SIGKILL: what the profile keeps is the periodic flushes'
    """)
    plain = subprocess.Popen([py, path], env=clean_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    s = subprocess.Popen([py, "-m", "sonde", "-o", str(db),
                          *(["--builtins"] if mode == "builtins" else []), path],
                         env=clean_env(PYTHONPATH=PYTHONPATH, SONDE_FLUSH_INTERVAL="0.5"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    outs = killed_after_lines((plain, s), 4)
    assert outs[1] == outs[0], outs
    assert outs[0][0][0] == "caught: []\n" and "multi-threaded" not in outs[1][1], outs
    # A SIGKILL inside a periodic flush (every 0.5 s here) leaves a hot journal, which a
    # read-only connection cannot roll back ("attempt to write a readonly database", seen in CI):
    # a read-write open rolls the killed flush back first, as SQLite recovers any writer's.
    con = sqlite3.connect(str(db))
    try:
        con.execute("SELECT COUNT(*) FROM processes").fetchall()
    finally:
        con.close()
    # Flushed after the forks, by the thread started again: the parent's call since, which only
    # a periodic flush wrote (os.fork's wrapper is C: no frame of sonde's own). square's 10
    # calls are the workers'.
    assert python_calls(db, "parent_after") == 1
    assert python_calls(db, "square") == 10
    assert query(db, "SELECT COUNT(*) FROM processes WHERE origin = 'fork'")[0][0] >= 3
    own = query(db, "SELECT r.name FROM nodes n JOIN routines r USING (routine_id) "
                    "WHERE r.file LIKE '%/sonde/%'")
    assert own == [], own


@pytest.mark.parametrize("launch", ["preload", "sonde-run"])
@pytest.mark.parametrize("py", PYTHONS)
def test_a_fork_without_the_hook_warns_as_without_sonde(db, tmp_path, py, launch):
    # The same warning where no Python hook starts (LD_PRELOAD alone; `sonde run` without
    # --python): the extension's wrappers never ran there, and every os.fork from __main__
    # warned on stderr. libsonde now puts them in place itself, from an audit hook, as the
    # program's code is about to run.
    path = script(tmp_path, "forkwarn_native.py", """
        import inspect
        import multiprocessing as mp
        import os
        import time

        def square(x):
            return x * x

        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        with mp.get_context("fork").Pool(2) as pool:
            print(sum(pool.map(square, range(10))))
        print(os.fork.__name__, os.fork is __import__("posix").fork, inspect.signature(os.fork))
        time.sleep(1.5)  # the flush the forks asked for, by the flusher started again
        print("after", flush=True)
        time.sleep(60)  # ended by SIGKILL: what the profile keeps is what was flushed
    """)
    argv = [py, str(path)]
    plain = subprocess.Popen(argv, env=clean_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    if launch == "preload":
        cmd, env = argv, clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, SONDE_FLUSH_INTERVAL="0.5")
    else:
        cmd, env = [CLI, "run", "-o", str(db), "--", *argv], clean_env(SONDE_FLUSH_INTERVAL="0.5")
    s = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=tmp_path)
    outs = killed_after_lines((plain, s), 3)
    assert outs[0] == (["285\n", "fork True ()\n", "after\n"], ""), outs
    assert outs[1][0] == outs[0][0] and "multi-threaded" not in outs[1][1], outs
    con = sqlite3.connect(str(db))  # read-write: a flush the kill cut rolls back first
    try:
        origins = con.execute("SELECT origin, COUNT(*) FROM processes GROUP BY origin").fetchall()
    finally:
        con.close()
    # The parent's row comes from a flush after the forks (its first periodic one is later).
    assert dict(origins).get("fork", 0) >= 3 and len(origins) == 2, origins


@pytest.mark.parametrize("debug", ["PYTHONMALLOC=debug", "PYTHONMALLOC=pymalloc_debug",
                                   "PYTHONDEVMODE=1", "-X dev", "-Xdev"])
@pytest.mark.parametrize("py", PYTHONS)
def test_the_fork_guard_never_meets_a_debug_allocator(db, tmp_path, py, debug):
    # The audit hook that guards os.fork under LD_PRELOAD is added before the interpreter
    # starts, by the plain allocator; CPython frees it at its end through the configured one,
    # and its debug hooks aborted there ("Fatal Python error: _PyMem_DebugRawFree: bad ID",
    # rc 134). Where they will be on, no hook is added (the fork warns, as before the guard).
    path = script(tmp_path, "debugalloc.py", """
        import os
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        print(os.waitpid(pid, 0)[1])
    """)
    env = dict([debug.split("=")]) if "=" in debug else {}
    argv = [py, *debug.split()[:2], str(path)] if debug.startswith("-") else [py, str(path)]
    r = subprocess.run(argv, env=clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, **env),
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert (r.returncode, r.stdout) == (0, "0\n"), r.stderr
    assert "Fatal Python error" not in r.stderr, r.stderr
    assert query(db, "SELECT COUNT(*) FROM processes") == [(2,)]


@pytest.mark.parametrize("py", PYTHONS)
def test_threads_forking_at_once_share_one_pause(db, tmp_path, py):
    # os.fork stops sonde's flusher for the fork (the test above): two threads forking at once
    # each joined the same flusher, glibc refused the second join, whose failure let the
    # flusher run on, and the first waited out the join's bound, 95 s a collision (a thread
    # pool whose tasks start multiprocessing's fork children: 0.1 s alone, 95 s under sonde, a
    # red-team find). Now they share one pause: the first stops it, the last starts it again.
    path = script(tmp_path, "forkstorm.py", """
        import os, threading, time, warnings
        warnings.simplefilter("ignore", DeprecationWarning)

        def worker():
            for _ in range(25):
                pid = os.fork()
                if pid == 0:
                    os._exit(0)
                os.waitpid(pid, 0)

        def after():
            pass

        start = time.monotonic()
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after()
        time.sleep(0.6)  # a flush interval: the flusher runs again after the forks
        print("forked", round(time.monotonic() - start) < 10)
    """)
    start = time.monotonic()
    r = sonde_py(py, [path], db, tmp_path, SONDE_FLUSH_INTERVAL="0.25")
    seconds = time.monotonic() - start
    assert (r.returncode, r.stdout) == (0, "forked True\n"), r.stderr
    assert seconds < 30, seconds
    assert query(db, "SELECT COUNT(*) FROM processes WHERE origin = 'fork'") == [(100,)]
    assert python_calls(db, "after") == 1


@pytest.mark.parametrize("py", PYTHONS)
def test_a_program_that_runs_cprofile_itself_still_can(db, tmp_path, py):
    # cProfile takes sys.monitoring's PROFILER_ID on 3.12+: sonde keeps off it.
    path = script(tmp_path, "selfprof.py", """
        import cProfile, pstats

        def f(n):
            return sum(range(n))

        prof = cProfile.Profile()
        prof.enable()
        for i in range(5):
            f(i)
        prof.disable()
        stats = pstats.Stats(prof).stats  # (file, line, name): (primitive, calls, ...)
        print([v[1] for k, v in stats.items() if k[2] == "f"])
    """)
    r = sonde_py(py, [path], db, tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "[5]\n", f"sonde: profile written to {db}\n")
    assert python_calls(db, "f") == 5


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("py", PYTHONS)
def test_regions_through_sys_monitoring(db, tmp_path, py, mode):
    """sonde.region's enter, exit and decorated callable are no frames for sys.monitoring's CALL
    event (--builtins): the region holds the function and the builtin it calls."""
    path = script(tmp_path, "reg.py", """
        import sonde
        @sonde.region("step")
        def step(x):
            with sonde.region("inner"):
                return sorted(x)
        for _ in range(4):
            step([3, 1, 2])
    """)
    r = sonde_py(py, [path], db, tmp_path, mode=mode)
    assert r.returncode == 0, r.stderr
    paths = {p.split("reg.py:1(<module>);", 1)[1]: c
             for p, c in query(db, "SELECT path, calls FROM callpaths WHERE path LIKE '%step%'")}
    sorted_frame = {"step;reg.py:3(step);inner;<built-in builtins.sorted>": 4} if mode == "builtins" else {}
    assert paths == {"step": 4, "step;reg.py:3(step)": 4, "step;reg.py:3(step);inner": 4,
                     **sorted_frame}, paths


@pytest.mark.parametrize("py", PYTHONS)
def test_arrays_only_handed_on_or_filled_are_not_subnormal_operands(py, tmp_path):
    from test_tune_learn import only_computed_on_is_flagged
    only_computed_on_is_flagged(tmp_path, py)


@pytest.mark.parametrize("py", PYTHONS)
def test_a_program_freeing_sondes_tool_id_is_said_and_its_tool_kept(db, tmp_path, py):
    # A cleanup loop freeing every tool id takes sonde's: the frames after it are not recorded,
    # which went unsaid, and the program's own tool on that id must keep it (a red-team find).
    path = script(tmp_path, "freeall.py", """
        import sys
        M = sys.monitoring

        def f(i):
            return i + 1

        a = sum(f(i) for i in range(100))
        for i in range(6):
            try:
                M.set_events(i, 0)
                M.free_tool_id(i)
            except ValueError:  # an id no tool holds
                pass
        b = sum(f(i) for i in range(200))
        M.use_tool_id(4, "mine")
        print(a, b, M.get_tool(4))
    """)
    r = sonde_py(py, [path], db, tmp_path)
    assert r.returncode == 0 and r.stdout == "5050 20100 mine\n", r.stderr
    notes = [m for (m,) in query(db, "SELECT message FROM notes WHERE topic = 'python'")]
    assert any("freed sys.monitoring's tool id 4" in m for m in notes), notes
