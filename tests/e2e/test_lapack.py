"""numpy.linalg under sonde: the LAPACK routines numpy calls (Debian's numpy through
liblapack.so.3) are intercepted as BLAS routines are, with LAPACK Working Note 41's operation
counts where it gives them (LU, Cholesky, their solves, QR) and time alone for the eigenvalue
and singular value drivers. A red team's solve/inv/cholesky run read 80 % Python exclusive time
at 0.00 GFLOP/s, and no rule fired."""
import os
import subprocess
import textwrap

import pytest

from conftest import clean_env, query

PY = "/usr/bin/python3"
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
N, NRHS = 300, 7


def routines(db):
    """{name: (calls, flops)} of the blas routines."""
    return {name: (calls, flops) for name, calls, flops in query(
        db, "SELECT r.name, SUM(n.calls), SUM(n.flops) FROM nodes n JOIN routines r "
            "USING (routine_id) WHERE r.kind = 'blas' GROUP BY r.name")}


def test_numpy_linalg_calls_lapack_with_its_operation_counts(tmp_path):
    program = tmp_path / "linalg.py"
    program.write_text(textwrap.dedent(f"""\
        import numpy as np
        rng = np.random.default_rng(0)
        A = rng.standard_normal(({N}, {N})) + {N} * np.eye({N})
        B = rng.standard_normal(({N}, {NRHS}))
        x = np.linalg.solve(A, B)                  # dgesv_: LU and {NRHS} solves
        Ai = np.linalg.inv(A)                      # dgesv_ with the identity's {N} columns
        L = np.linalg.cholesky(A @ A.T)            # dpotrf_ (the product: dgemm or dsyrk)
        d = np.linalg.slogdet(A)                   # dgetrf_
        w = np.linalg.eigvalsh(A + A.T)            # dsyevd_: timed only
        s = np.linalg.svd(A, compute_uv=False)     # dgesdd_: timed only
        Q, R = np.linalg.qr(A[:, :{NRHS}])           # dgeqrf_ and dorgqr_ ({N} x {NRHS})
        e = np.linalg.eigvals(A)                   # dgeev_: timed only
        c = np.linalg.lstsq(A, B, rcond=None)[0]   # dgelsd_: timed only, its dgemv_ within
        print(f"{{np.abs(A @ x - B).max():.2e}} {{np.abs(A @ Ai - np.eye({N})).max():.2e}}")
        """))
    db = tmp_path / "linalg.db"
    env = clean_env(PYTHONPATH=PYTHONPATH, OPENBLAS_NUM_THREADS=1)
    plain = subprocess.run([PY, str(program)], env=env, capture_output=True, text=True,
                           timeout=300)
    r = subprocess.run([PY, "-m", "sonde", "-o", str(db), str(program)], env=env,
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and plain.returncode == 0, r.stderr
    assert r.stdout == plain.stdout  # the same residuals, to the digit
    got = routines(db)
    n = float(N)
    lu = n ** 3 - n ** 3 / 3  # mn^2 - n^3/3 with m = n: 2n^3/3
    assert got["dgesv_"][0] == 2
    assert got["dgesv_"][1] == pytest.approx(2 * lu + 2 * n * n * (NRHS + N), rel=1e-9)
    assert got["dpotrf_"] == (1, pytest.approx(n ** 3 / 3, rel=1e-9))
    assert got["dgetrf_"] == (1, pytest.approx(lu, rel=1e-9))
    # QR: the factorization and Q of the reduced form. numpy asks each routine's workspace
    # first (lwork = -1), a call that is no work: not counted (dsyevd_ read 80,000 calls for a
    # red team's 40,000 eigh, each half as long).
    m, k = n, float(NRHS)
    assert got["dgeqrf_"][0] == 1 and got["dorgqr_"][0] == 1, got
    assert got["dgeqrf_"][1] == pytest.approx(2 * m * k * k - 2 * k ** 3 / 3, abs=1)  # whole FLOPs
    assert got["dorgqr_"][1] == pytest.approx(4 * m * k * k - 2 * (m + k) * k * k + 4 * k ** 3 / 3,
                                              abs=1)
    # lstsq's dgelsd_ makes hundreds of dgemv_ calls of its own: inside it, not the program's.
    assert "dgemv_" not in got, got["dgemv_"]
    # The drivers: one call each (their workspace queries not counted), no FLOPs.
    for driver in ("dsyevd_", "dgesdd_", "dgeev_", "dgelsd_"):
        assert got[driver] == (1, 0), (driver, got[driver])
    (ns,), = query(db, "SELECT SUM(n.incl_ns) FROM nodes n JOIN routines r USING (routine_id) "
                       "WHERE r.name = 'dgesdd_'")
    assert ns > 0
    # The time is no longer Python's own: numpy's solve frame holds the LAPACK call beneath it.
    (solve_excl, solve_incl), = query(
        db, "SELECT SUM(n.excl_ns), SUM(n.incl_ns) FROM nodes n JOIN routines r USING "
            "(routine_id) WHERE r.name LIKE 'linalg.py:%(solve)'")
    assert solve_excl < solve_incl / 2, (solve_excl, solve_incl)
