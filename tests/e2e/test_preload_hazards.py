"""The known ways an LD_PRELOAD tool breaks real programs, and real BLAS users."""
import os
import resource
import textwrap

import pytest

from conftest import BIN, CLI, query, routine_calls, run

PY = "/usr/bin/python3"


def test_dlopen_through_the_callers_runpath_still_works(db):
    assert run([BIN / "origin_loader"]).stdout == "loaded 42\n"
    r = run([BIN / "origin_loader"], db)
    assert (r.returncode, r.stdout) == (0, "loaded 42\n")


def test_deepbind_libraries_are_reported(db):
    r = run([BIN / "misbehave", "deepbind"], db)
    assert r.returncode == 0 and "deepbind loaded" in r.stdout
    [(message,)] = query(db, "SELECT message FROM notes WHERE topic = 'deepbind'")
    assert "libm.so.6" in message and "RTLD_DEEPBIND" in message


def test_cuptis_own_deepbind_of_its_profiler_library_is_not_reported(db, tmp_path):
    # CUPTI opens libnvperf_host.so with RTLD_DEEPBIND under SONDE_GPU_METRICS (seen on an
    # H200): sonde's own doing, and libnvperf calls nothing sonde measures. A stand-in by name.
    lib = tmp_path / "libnvperf_host.so"
    lib.symlink_to(os.path.realpath("/lib/x86_64-linux-gnu/libm.so.6"))
    r = run([BIN / "misbehave", "deepbind", lib], db)
    assert r.returncode == 0 and "deepbind loaded" in r.stdout
    assert query(db, "SELECT message FROM notes WHERE topic = 'deepbind'") == []


def test_static_blas_is_reported_not_an_empty_profile(db):
    r = run([BIN / "static_blas"], db)
    assert r.returncode == 0 and r.stdout == "c 7 10 15 22\n"
    topics = {t for (t,) in query(db, "SELECT topic FROM notes")}
    assert "static-blas" in topics
    report = run([CLI, "report", db])
    assert report.returncode == 0
    assert "linked statically" in report.stdout + report.stderr


def test_processes_that_compute_nothing_are_not_told_their_blas_was_missed(db, tmp_path):
    # A launcher, a shell, multiprocessing's resource tracker: no library sonde wraps and little
    # CPU. The root's "nothing was intercepted ... linked statically or RTLD_DEEPBIND" sent users
    # looking for a BLAS problem there; a process that spun half a second still gets it.
    spin = tmp_path / "spin.py"
    spin.write_text("import time\nt = time.process_time()\n"
                    "while time.process_time() - t < 0.6: pass\n")
    quiet = run(["/bin/sleep", "0.1"], db)
    assert quiet.returncode == 0 and "nothing was intercepted" not in quiet.stderr
    assert query(db, "SELECT COUNT(*) FROM notes WHERE topic = 'no-calls'") == [(0,)]
    os.unlink(db)
    busy = run(["/usr/bin/python3", spin], db)
    assert busy.returncode == 0 and "nothing was intercepted" in busy.stderr


def test_blas_called_through_dlsym_on_its_handle_is_named_as_a_cause(db, tmp_path):
    # ctypes.CDLL("libopenblas.so.0").cblas_dgemm: dlsym on the library's own handle gives its
    # own definition, past LD_PRELOAD's, and no call is recorded. The note named only a static
    # BLAS and RTLD_DEEPBIND, neither of which this program had (a red-team find).
    prog = tmp_path / "by_handle.py"
    prog.write_text(textwrap.dedent("""\
        import ctypes
        blas = ctypes.CDLL("libopenblas.so.0")
        n = 64
        a = (ctypes.c_double * (n * n))(*([1.0] * (n * n)))
        c = (ctypes.c_double * (n * n))()
        for _ in range(20):
            blas.cblas_dgemm(101, 111, 111, n, n, n, ctypes.c_double(1.0), a, n, a, n,
                             ctypes.c_double(0.0), c, n)
        print(c[0])
    """))
    r = run(["/usr/bin/python3", prog], db, OPENBLAS_NUM_THREADS=1)
    assert r.returncode == 0 and r.stdout == "64.0\n", r.stderr
    assert routine_calls(db, "cblas_dgemm") == 0  # what the note explains
    [(message,)] = query(db, "SELECT message FROM notes WHERE topic = 'no-calls'")
    assert "dlsym" in message and "ctypes.CDLL" in message, message


def test_fork_children_that_call_nothing_are_not_told_their_blas_was_missed(db, tmp_path):
    # A torch DataLoader's workers under `sonde run` without --python: forks that have every
    # library their parent loaded (BLAS among them) and call none. Each was told "nothing was
    # intercepted ... linked statically or RTLD_DEEPBIND"; the python-hook note says what they
    # are (Python without the hook), and the parent's BLAS calls are in the profile.
    prog = tmp_path / "forks.py"
    prog.write_text(textwrap.dedent("""\
        import os
        import numpy as np
        a = np.ones((64, 64), dtype=np.float32)
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        print(float((a @ a)[0, 0]))
    """))
    r = run(["/usr/bin/python3", prog], db, OPENBLAS_NUM_THREADS=1)
    assert r.returncode == 0 and r.stdout == "64.0\n", r.stderr
    assert routine_calls(db, "cblas_sgemm") == 1
    forks = query(db, "SELECT COUNT(*) FROM processes WHERE origin = 'fork'")[0][0]
    topics = query(db, "SELECT p.origin, n.topic FROM notes n JOIN processes p "
                       "USING (process_id) WHERE n.topic IN ('no-calls', 'python-hook')")
    assert forks == 3 and ("fork", "no-calls") not in topics, topics
    assert topics.count(("fork", "python-hook")) == 3, topics


def test_numpy_blas_behind_rtld_local_is_found(db, tmp_path):
    script = tmp_path / "np_gemm.py"
    script.write_text(textwrap.dedent("""
        import numpy as np
        a = np.ones((100, 200), dtype=np.float32)
        b = np.ones((200, 300), dtype=np.float32)
        for _ in range(7):
            c = a @ b
        s = a @ a.T
        print(float(c.sum()), float(s.sum()))
    """))
    bare = run([PY, script])
    r = run([PY, script], db)
    assert r.returncode == 0, r.stderr
    assert r.stdout == bare.stdout
    assert query(db, "SELECT m, n, k, calls FROM gemm_shapes WHERE routine = 'cblas_sgemm' "
                     "AND m = 100 AND n = 300 AND k = 200") == [(100, 300, 200, 7)]
    assert routine_calls(db, "cblas_ssyrk") == 1
    [(lib,)] = query(db, "SELECT value FROM run_info WHERE key = 'blas.library'")
    assert "blas" in lib


def test_pytorch_fortran_sgemm_is_intercepted(db, tmp_path):
    pytest.importorskip("numpy")
    if run([PY, "-c", "import torch"]).returncode != 0:
        pytest.skip("python3-torch is not installed")
    script = tmp_path / "torch_mm.py"
    script.write_text(textwrap.dedent("""
        import torch
        torch.manual_seed(0)
        a = torch.randn(64, 128)
        b = torch.randn(128, 32)
        for _ in range(5):
            c = torch.mm(a, b)
        print(round(float(c.sum()), 3))
    """))
    bare = run([PY, script], OMP_NUM_THREADS=1)
    r = run([PY, script], db, OMP_NUM_THREADS=1)
    assert r.returncode == 0, r.stderr
    assert r.stdout == bare.stdout
    shapes = query(db, "SELECT routine, m, n, k, calls FROM gemm_shapes")
    # torch calls column-major sgemm_ for the row-major product: (M, N, K) = (32, 64, 128).
    assert ("sgemm_", 32, 64, 128, 5) in shapes, shapes


def test_blas_called_from_a_constructor_and_an_early_thread_works(db):
    bare = run([BIN / "ctor_main"])
    r = run([BIN / "ctor_main"], db)
    assert bare.stdout == "ctor 25 thread 14\nmain 2\n"
    assert (r.returncode, r.stdout) == (0, bare.stdout)
    # Calls made before sonde was ready are forwarded, not lost in a crash; main's is counted.
    assert 1 <= routine_calls(db, "cblas_sdot") <= 1002


def test_the_descriptor_table_is_grown_while_the_process_has_one_thread(db, tmp_path):
    # sonde moves its files' descriptors near the top of the guarded range (store/fd_guard.hpp).
    # Linux grows the descriptor table of a process with more than one thread only after an RCU
    # grace period: every process paid 14-21 ms of wall time, with no CPU, at its first flush,
    # when sonde's own thread was there. The table is now grown at start and in a fork child,
    # while the process has one thread; /proc's FDSize is the table's size.
    script = tmp_path / "fdsize.py"
    script.write_text(textwrap.dedent("""
        import os
        def seen():
            size = next(int(l.split()[1]) for l in open("/proc/self/status")
                        if l.startswith("FDSize:"))
            return size, len(os.listdir("/proc/self/fd"))
        print("parent", *seen(), flush=True)
        pid = os.fork()
        if pid == 0:
            print("child", *seen(), flush=True)
            os._exit(0)
        os.waitpid(pid, 0)
    """))
    bare = run([PY, script])
    r = run([PY, script], db)
    assert bare.returncode == 0 and r.returncode == 0, r.stderr
    top = min(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 4096)
    if top < 512:
        pytest.skip("the descriptor limit leaves sonde's files where the host's are")
    high = top - 64  # where sonde's first file goes (fd_guard.cpp)
    def table(out):  # who -> (table size, open descriptors)
        return {who: (int(size), int(n)) for who, size, n in map(str.split, out.splitlines())}
    plain, under = table(bare.stdout), table(r.stdout)
    assert plain["parent"][0] <= high and plain["child"][0] <= high, bare.stdout
    for who in ("parent", "child"):
        assert under[who][0] > high, r.stdout
        assert under[who][1] == plain[who][1], "a descriptor of sonde's was left open"
    assert query(db, "SELECT COUNT(*) FROM processes") == [(2,)]
