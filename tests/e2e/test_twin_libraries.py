"""Two libraries defining one intercepted name, each reached by its own caller: a pip wheel of
PyTorch calls the MKL inside libtorch_cpu.so while numpy calls its OpenBLAS; two extensions may
each bring a CUDA runtime. Without sonde each caller opened RTLD_LOCAL binds within its own
dependencies. sonde's wrapper looked the real definition up once, for every caller, so the
second library's calls ran in the first (libprof/src/symbols/real_symbol.cpp, RealSymbol).

programs/twin_blas.c is built twice (libtwin_blas_a.so writes 1 into C, _b 2), each called by
its own twin_user library; twin_main opens both users RTLD_LOCAL and prints which library each
one's products reached. Run as a program under `sonde run` (LD_PRELOAD) and from Python through
ctypes under `python3 -m sonde` (the in-process launch)."""
import os
import subprocess

import pytest

from conftest import BIN, CLI, clean_env, integrity_ok, routine_calls

PY = "/usr/bin/python3"
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
MAIN = BIN / "twin_main"
USERS = [str(BIN / "twin" / f"libtwin_user_{t}.so") for t in "ab"]
CALLS = 4

pytestmark = pytest.mark.skipif(not MAIN.exists(), reason="twin_main is not built")


def test_each_caller_reaches_its_own_library_under_sonde_run(tmp_path):
    plain = subprocess.run([str(MAIN), *USERS, str(CALLS)], capture_output=True, text=True,
                           env=clean_env())
    assert plain.returncode == 0 and plain.stdout == "a 1 b 2\n", (plain.stdout, plain.stderr)
    db = tmp_path / "prof.db"
    r = subprocess.run([CLI, "run", "-o", str(db), "--", str(MAIN), *USERS, str(CALLS)],
                       capture_output=True, text=True, env=clean_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout  # before: "a 1 b 1", b's products ran in a's library
    assert integrity_ok(db)
    assert routine_calls(db, "sgemm_") == 2 * CALLS


SCRIPT = """\
import ctypes, sys
users = [ctypes.CDLL(path) for path in sys.argv[1:3]]  # RTLD_LOCAL, as Python loads extensions

def products(lib):
    return [lib.twin_user_gemm() for _ in range(%d)]

# The second library first: whichever is called first must not decide for the other.
b, a = products(users[1]), products(users[0])
print("a", sorted(set(a)), "b", sorted(set(b)))
""" % CALLS


def test_each_caller_reaches_its_own_library_from_python(tmp_path):
    script = tmp_path / "twins.py"
    script.write_text(SCRIPT)
    env = clean_env(PYTHONPATH=PYTHONPATH)
    plain = subprocess.run([PY, str(script), *USERS], capture_output=True, text=True, env=env)
    assert plain.returncode == 0 and plain.stdout == "a [1] b [2]\n", (plain.stdout, plain.stderr)
    db = tmp_path / "prof.db"
    r = subprocess.run([PY, "-m", "sonde", "-o", str(db), str(script), *USERS],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert routine_calls(db, "sgemm_") == 2 * CALLS
