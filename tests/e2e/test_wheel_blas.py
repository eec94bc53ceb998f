"""The BLAS of pip's numpy and scipy wheels (wrappers/blas/blas_wrappers.cpp): numpy 1.22-1.26's
openblas64_ (cblas_sgemm64_), numpy 2.x's scipy-openblas64 (scipy_cblas_sgemm64_, ILP64) and
scipy's scipy-openblas32 (scipy_cblas_sgemm, LP64). Before, a numpy from pip ran every product
unseen. programs/wheel_blas.c defines those names over Debian's real ILP64 and LP64 OpenBLAS
(libopenblas64-0-pthread, libopenblas0); wheel_blas_user.c calls them as numpy's extension
does, from a program (sonde run: LD_PRELOAD) and from Python through ctypes (python3 -m sonde:
the in-process launch, libsonde loaded into the interpreter before the library)."""
import os
import subprocess

import pytest

from conftest import BIN, CLI, clean_env, integrity_ok, query, routine_calls

PY = "/usr/bin/python3"
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
MAIN = BIN / "wheel_blas_main"
USER = BIN / "libwheel_blas_user.so"
M, N, K, REPS = 64, 48, 32, 3
# Each name the program calls, its element type, and its product as (m, n, k): the Fortran
# sgemm computes the same product column-major, so its m and n are swapped.
GEMMS = {"cblas_sgemm64_": ("f32", (M, N, K)), "scipy_cblas_sgemm64_": ("f32", (M, N, K)),
         "scipy_cblas_dgemm64_": ("f64", (M, N, K)), "scipy_cblas_sgemm": ("f32", (M, N, K)),
         "scipy_sgemm_64_": ("f32", (N, M, K))}
DOTS = ["scipy_cblas_sdot64_"]


def have_ilp64_openblas():
    r = subprocess.run([str(MAIN), "2", "2", "2", "1"], capture_output=True, text=True,
                       env=clean_env())
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not MAIN.exists() or not have_ilp64_openblas(),
                                reason="wheel_blas_main or Debian's libopenblas64-0 is missing")


def shapes(db):
    return {r: (d, (m, n, k), c, t, f) for r, m, n, k, d, c, t, f in query(
        db, "SELECT routine, m, n, k, dtype, calls, threads, flops FROM gemm_shapes")}


def assert_every_name_counted(db, threads):
    for name, (dtype, mnk) in GEMMS.items():
        m, n, k = mnk
        got = shapes(db).get(name)
        assert got == (dtype, mnk, REPS, threads, 2.0 * m * n * k * REPS), (name, shapes(db))
    for name in DOTS:
        assert routine_calls(db, name) == REPS
    kinds = dict(query(db, "SELECT name, kind FROM routines WHERE name IN (%s)" %
                           ",".join("?" * (len(GEMMS) + len(DOTS))), [*GEMMS, *DOTS]))
    assert set(kinds.values()) == {"blas"} and len(kinds) == len(GEMMS) + len(DOTS)


def test_wheel_names_under_sonde_run(tmp_path):
    plain = subprocess.run([str(MAIN), str(M), str(N), str(K), str(REPS)],
                           capture_output=True, text=True, env=clean_env(OPENBLAS_NUM_THREADS=2))
    assert plain.returncode == 0, plain.stderr
    db = tmp_path / "prof.db"
    r = subprocess.run([CLI, "run", "-o", str(db), "--", str(MAIN), str(M), str(N), str(K),
                        str(REPS)], capture_output=True, text=True,
                       env=clean_env(OPENBLAS_NUM_THREADS=2))
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout  # OpenBLAS's results, unchanged by the wrappers
    assert integrity_ok(db)
    assert_every_name_counted(db, threads=2)
    info = dict(query(db, "SELECT key, value FROM run_info WHERE key LIKE 'blas.%'"))
    # The thread query and configuration under the wheel's names (scipy_openblas_*64_).
    assert info["blas.threads"] == "2"
    assert info["blas.first_routine"] == "cblas_sgemm64_"
    assert info["blas.library"].endswith("libwheel_blas.so")
    assert "USE64BITINT" in info["blas.config"]


SCRIPT = """\
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])  # RTLD_LOCAL, as Python loads numpy's extension
lib.run_products.restype = ctypes.c_double
lib.run_products.argtypes = [ctypes.c_int64] * 3 + [ctypes.c_int]

def train_step():
    return lib.run_products(%d, %d, %d, %d)

print("checksum %%.6f" %% train_step())
""" % (M, N, K, REPS)


@pytest.mark.parametrize("launch", [[], ["--re-exec"]], ids=["in-process", "re-exec"])
def test_wheel_names_from_python_beneath_the_frame(tmp_path, launch):
    script = tmp_path / "numpy_like.py"
    script.write_text(SCRIPT)
    env = clean_env(PYTHONPATH=PYTHONPATH, OPENBLAS_NUM_THREADS=1)
    plain = subprocess.run([PY, str(script), str(USER)], capture_output=True, text=True, env=env)
    assert plain.returncode == 0, plain.stderr
    db = tmp_path / "prof.db"
    r = subprocess.run([PY, "-m", "sonde", *launch, "-o", str(db), str(script), str(USER)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout
    assert_every_name_counted(db, threads=1)
    # Each product beneath the Python frame that made it, as numpy's would be.
    paths = {p for (p,) in query(db, "SELECT path FROM callpaths")}
    for name in [*GEMMS, *DOTS]:
        assert any(p.endswith("(train_step);" + name) for p in paths), (name, sorted(paths))
