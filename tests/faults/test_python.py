"""Python hosts: the interpreter behaves as it does without sonde, and call counts are exact."""
import os
import textwrap
from pathlib import Path

import pytest

from conftest import LIB, clean_env, plain, profile_whole, query, run, same_behaviour

PY = "/usr/bin/python3"
PYTHONPATH = str(Path(os.environ.get("SONDE_BUILD", ".")) / "python")
# python3 -m sonde --re-exec (the program started again under sonde run; the default launch
# until 2026-12-03), python3 -m sonde --builtins (the profile function on 3.11),
# python3 -m sonde --in-process (libsonde loaded into the running interpreter, the default), and
# LD_PRELOAD alone (native calls only, no Python hook).
MODES = ["reexec", "builtins", "inprocess", "preload"]


def under(mode, args, db, timeout=60):
    if mode == "preload":
        return run([PY, *args], env=clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db), timeout=timeout)
    opts = {"reexec": ["--re-exec"], "builtins": ["--builtins"],
            "inprocess": ["--in-process"]}.get(mode, [])
    return run([PY, "-m", "sonde", "-o", db, *opts, *args], env=clean_env(PYTHONPATH=PYTHONPATH),
               timeout=timeout)


def script(tmp_path, body):
    path = tmp_path / "host.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


def python_calls(db, function):
    return query(db, "SELECT COALESCE(SUM(n.calls), 0) FROM nodes n JOIN routines r "
                     "USING (routine_id) WHERE r.kind = 'python' AND r.name LIKE ?",
                 (f"%({function})",))[0][0]


# A program with its own code-extra slot and free function (as test_code and JIT-like tools
# have): under sonde it must get the same slot, and its free function must be called for the
# code objects it tagged and no others.
CODE_EXTRA = """
    import ctypes, gc
    FREEFUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
    freed = {"tagged": 0, "untagged": 0}

    @FREEFUNC
    def free(p):
        freed["tagged" if p else "untagged"] += 1

    request = ctypes.pythonapi._PyEval_RequestCodeExtraIndex
    request.argtypes, request.restype = (FREEFUNC,), ctypes.c_ssize_t
    set_extra = ctypes.pythonapi._PyCode_SetExtra
    set_extra.argtypes = (ctypes.py_object, ctypes.c_ssize_t, ctypes.c_void_p)
    index = request(free)

    def make(i):
        ns = {}
        exec(f"def f{i}(x):\\n    return x + {i}\\n", ns)
        return ns[f"f{i}"]

    total = 0
    for i in range(200):
        f = make(i)
        total += f(i)
        if i % 2:
            set_extra(f.__code__, index, 1)
        del f
    gc.collect()
    print(total, index, freed, flush=True)
"""


@pytest.mark.parametrize("mode", MODES)
def test_code_extra_users(mode, db, tmp_path):
    """a program's own code extras: same slot, its free function called as without sonde"""
    host = [script(tmp_path, CODE_EXTRA)]
    alone = plain([PY, *host])
    assert alone.rc == 0 and "'untagged': 0" in alone.out, alone.err
    same_behaviour(alone, under(mode, host, db))
    profile_whole(db)


# Threads started inside a sub-interpreter (test_threading's SubinterpThreadingTests): the
# sub-interpreter's site imports sonde's sitecustomize too.
SUBINTERP = """
    import os, _testcapi
    r, w = os.pipe()
    code = f'''if 1:
        import threading, os
        out = []
        t = threading.Thread(target=lambda: out.append(sum(range(100))))
        t.start(); t.join()
        os.write({w}, repr(out).encode())
    '''
    rc = _testcapi.run_in_subinterp(code)
    os.close(w)
    print(rc, os.read(r, 100).decode())
"""


@pytest.mark.parametrize("mode", MODES)
def test_subinterpreter_threads(mode, db, tmp_path):
    """threads of a sub-interpreter run as without sonde (it is not recorded)"""
    host = [script(tmp_path, SUBINTERP)]
    alone = plain([PY, *host])
    assert alone.out == "0 [4950]\n", alone.err
    profiled = under(mode, host, db)
    same_behaviour(alone, profiled)
    assert "Error" not in profiled.err, profiled.err
    profile_whole(db)


# CPython before 3.11.4 (gh-104405) pushes the frame of a Python __getitem__ that `obj[i]` was
# specialised for without the frame-evaluation hook: 7 of 8000 calls were recorded.
GETITEM = """
    class Items:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return i * 2

    items = Items(8000)
    print(sum(items[i] for i in range(len(items))))
"""


@pytest.mark.parametrize("mode", ["reexec", "builtins"])
def test_getitem_calls_exact(mode, db, tmp_path):
    """obj[i] over 8000 items: exactly 8000 __getitem__ calls recorded"""
    host = [script(tmp_path, GETITEM)]
    same_behaviour(plain([PY, *host]), under(mode, host, db))
    profile_whole(db)
    assert python_calls(db, "__getitem__") == 8000


# sonde.start() in a running program, after the subscript was specialised, and classes made
# afterwards (one per call of a factory) met first by a site that has been specialised before.
GETITEM_LATE = """
    import sys
    count = [0]

    def make():
        class Fresh:
            def __getitem__(self, i):
                count[0] += 1
                return i
        return Fresh()

    class Early:
        def __getitem__(self, i):
            count[0] += 1
            return i

    def loop(objs):
        return sum(o[1] for o in objs)

    loop([Early()] * 5000)
    if len(sys.argv) > 1:  # under sonde: the package's directory
        sys.path.insert(0, sys.argv[1])
        import sonde
        sonde.start()
    before = count[0]
    loop([Early()] * 500 + [make() for _ in range(10)] * 40 + [Early()] * 500)
    print(count[0] - before)
"""


def test_getitem_calls_exact_after_start(db, tmp_path):
    """obj[i] specialised before sonde.start(), new classes after: every call recorded"""
    host = script(tmp_path, GETITEM_LATE)
    alone = plain([PY, host])
    assert alone.out == "1400\n", alone.err
    same_behaviour(alone, run([PY, host, PYTHONPATH],
                              env=clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db)))
    profile_whole(db)
    assert python_calls(db, "__getitem__") == 1400


# gevent jobs (greenlets) switched out in the middle of their frames when one of them sends
# SIGTERM to the process: the death is the same, and the profile holds each job's calls as a
# call stack of its own (docs/python.md, "Greenlets").
GEVENT_KILLED = """
    import os, signal
    import gevent
    import numpy as np

    products = 0

    def job(i):
        global products
        a = np.ones((32, 32), dtype=np.float32)
        for n in range(1, 1000):
            a = a @ a / 32
            products += 1
            if i == 3 and n == 50:
                print("sgemm calls before the kill:", products, flush=True)
                os.kill(os.getpid(), signal.SIGTERM)
            gevent.sleep(0)

    gevent.joinall([gevent.spawn(job, i) for i in range(8)])
"""


@pytest.mark.parametrize("mode", ["reexec", "builtins", "inprocess"])
def test_gevent_jobs_killed_mid_switch(mode, db, tmp_path):
    """gevent jobs switched out mid-frame, SIGTERM from one of them: same death, each job's sgemm calls under it"""
    pytest.importorskip("gevent")
    host = script(tmp_path, GEVENT_KILLED)
    alone = plain([PY, host])
    profiled = under(mode, [host], db)
    same_behaviour(alone, profiled)
    profile_whole(db)
    expected = int(alone.out.split(":")[1])
    rows = query(db, "SELECT path, calls FROM callpaths WHERE path LIKE '%cblas_sgemm'")
    assert [(path.split(";")[0].endswith("(job)"), calls) for path, calls in rows] == \
        [(True, expected)]


# numpy keeps the buffer info it made for an array's first export on the array; numpy's own
# TestNewBufferProtocol.test_error_if_stored_buffer_info_is_corrupted sees it. The hook's
# subnormal check reads its float arguments' sizes and samples (issue 37): it must leave no
# such trace, and still see the subnormals.
NUMPY_BUFFER_INFO = """
    import numpy as np
    from numpy.core import _multiarray_tests

    def step(a):
        return a * 2.0

    a = np.full(256, 1e-310)  # subnormal float64s
    for _ in range(3000):
        step(a)
    _multiarray_tests.corrupt_or_fix_bufferinfo(a)
    try:
        memoryview(a)
        print("exported")
    except RuntimeError as e:
        print("refused:", "appears to be C subclassed" in str(e))
    _multiarray_tests.corrupt_or_fix_bufferinfo(a)
"""


@pytest.mark.parametrize("mode", ["reexec", "builtins", "inprocess"])
def test_numpy_arrays_are_sampled_without_exporting_them(mode, db, tmp_path):
    """numpy arrays the subnormal check samples keep no buffer export: numpy's stored buffer info is as without sonde"""
    host = script(tmp_path, NUMPY_BUFFER_INFO)
    alone = plain([PY, host])
    assert alone.out == "refused: True\n", alone.err
    same_behaviour(alone, under(mode, [host], db))
    if mode == "builtins":
        return  # the profile function (3.11's --builtins) does no argument check
    rows = dict(query(db, "SELECT key, value FROM run_info WHERE key LIKE 'python.subnormal:%'"))
    (share,) = [v for k, v in rows.items() if k.endswith("(step)")]
    assert float(share.split()[0]) == 1.0, rows


DATALOADER = """
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset

class Products(Dataset):
    def __len__(self):
        return 100_000
    def __getitem__(self, i):
        time.sleep(0.005)
        a = torch.ones(16, 16)
        return (a @ a).sum()

torch.set_num_threads(1)
for n, batch in enumerate(DataLoader(Products(), batch_size=4, num_workers=2)):
    if n == 0:
        print("ready", flush=True)
"""


def test_dataloader_killed_with_its_workers(db, tmp_path):
    """a torch DataLoader (2 workers) under `python3 -m sonde`, the whole process group killed by SIGKILL: every worker is in the profile or said missing"""
    import signal
    import sqlite3
    import subprocess
    import time
    pytest.importorskip("torch")
    host = script(tmp_path, DATALOADER)
    p = subprocess.Popen([PY, "-m", "sonde", "-o", db, host], env=clean_env(PYTHONPATH=PYTHONPATH),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    try:
        assert p.stdout.readline() == "ready\n", "the DataLoader never gave a batch"
        # The main process writes its forks soon after them (a flush the fork asks for): the
        # group is killed once they are in the file, well within the workers' first second.
        forks, deadline = 0, time.monotonic() + 20
        while forks < 2 and time.monotonic() < deadline:
            try:
                con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
                rows = con.execute("SELECT value FROM run_info WHERE key = 'process.forks'")
                forks = max([int(v) for (v,) in rows.fetchall()] + [0])
                con.close()
            except sqlite3.OperationalError:
                pass  # a writer's journal in the way: looked at again
            time.sleep(0.02)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=20)
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert forks == 2, "the main process did not write its two forks in 20 s"
    report = run(["sonde" if not os.environ.get("SONDE_CLI") else os.environ["SONDE_CLI"],
                  "report", db], env=clean_env())
    assert report.rc == 0, report.err
    profile_whole(db)
    workers = query(db, "SELECT pid FROM processes WHERE origin = 'fork'")
    missing = [line for line in report.out.splitlines()
               if "processes it forked wrote nothing" in line]
    # Workers that wrote a row (their first flush came before the kill) are said unfinished
    # each; the others, without a row, are counted in their parent's line. Before, they were
    # missing without a word.
    unfinished = [line for line in report.out.splitlines()
                  if "did not write its final flush" in line]
    assert len(unfinished) == 1 + len(workers), report.out
    if len(workers) < 2:
        assert len(missing) == 1 and missing[0].startswith(
            f"warning: {2 - len(workers)} of the 2 processes it forked"), report.out
    else:
        assert not missing, report.out


def test_killed_by_sigkill_before_its_first_flush(db, tmp_path):
    """`python3 -m sonde` on a program that kills itself with SIGKILL at once: it dies as alone, and the readers say no process wrote to the profile (it read as an empty run)"""
    host = script(tmp_path, """
        import os, signal
        print("started", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    alone = plain([PY, host])
    assert alone.rc == -9 and alone.out == "started\n", alone
    profiled = run([PY, "-m", "sonde", "-o", db, host], env=clean_env(PYTHONPATH=PYTHONPATH))
    same_behaviour(alone, profiled)
    assert query(db, "SELECT COUNT(*) FROM processes") == [(0,)]
    cli = os.environ.get("SONDE_CLI", "sonde")
    report = run([cli, "report", db], env=clean_env())
    assert report.rc == 0, report.err
    assert "warning: no process of the run wrote to this profile" in report.out, report.out
