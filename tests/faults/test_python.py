"""Python hosts: the interpreter behaves as it does without sonde, and call counts are exact."""
import os
import textwrap
from pathlib import Path

import pytest

from conftest import LIB, clean_env, plain, profile_whole, query, run, same_behaviour

PY = "/usr/bin/python3"
PYTHONPATH = str(Path(os.environ.get("SONDE_BUILD", ".")) / "python")
# python3 -m sonde (the default hook), python3 -m sonde --builtins (the profile function on
# 3.11), and LD_PRELOAD alone (native calls only, no Python hook).
MODES = ["default", "builtins", "preload"]


def under(mode, args, db, timeout=60):
    if mode == "preload":
        return run([PY, *args], env=clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db), timeout=timeout)
    opts = ["--builtins"] if mode == "builtins" else []
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
