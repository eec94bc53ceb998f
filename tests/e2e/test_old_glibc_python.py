"""A wheel's Python side on an older system: CPython 3.13 built in Debian 11 (glibc 2.31,
old_glibc_root.py) from Debian 13's python3.13 source package, and the cp313 wheel made from
this build installed by pip into a venv there, as a user of Ubuntu 20.04 or RHEL 8 with a
newer CPython of their own (pyenv, conda, uv) would. There, `python -m sonde` loads libsonde
into the running interpreter with no _dl_find_object (2.35) and no _Fork (2.34), and glibc's
libraries are files named for its release (ld-2.31.so, libc-2.31.so), which the in-process
launch once took for a library loaded before sonde: every such run went back to `sonde run`.

What the in-process launch rebinds there (rebind.cpp's RELRO check in place of the loader's
lookup), the hook's frames, threads, a fork, an exec'd child, a signal death and the sampler
are held against the same program under `--re-exec`, which needs none of it.

The source comes through a private apt state (apt checks its signatures) into the build
directory; CPython is built once into the system (about 5 minutes on one core) and kept.
Needs root (the chroot), pyenv's CPython 3.13 (to make the wheel) and a portable build."""
import glob
import subprocess
from pathlib import Path

import pytest

from conftest import query, routine_calls
from old_glibc_root import BUILD, make_root
from old_glibc_root import inside as inside_root
from test_wheels import FOUND, PORTABLE, make_wheel

PREFIX = "/opt/python3.13"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"

PROGRAM = """\
import ctypes, hashlib, os, signal, subprocess, sys, threading

ctypes.CDLL("libblas.so.3", mode=ctypes.RTLD_GLOBAL)
blas = ctypes.CDLL(None)  # the global scope, where a program linked to the BLAS finds it
N = 48


def gemm(reps):
    a = (ctypes.c_double * (N * N))(*[(i % 7) / 7.0 for i in range(N * N)])
    c = (ctypes.c_double * (N * N))()
    for _ in range(reps):
        blas.cblas_dgemm(101, 111, 111, N, N, N, ctypes.c_double(1.0), a, N, a, N,
                         ctypes.c_double(0.0), c, N)
    return hashlib.sha256(bytes(c)).hexdigest()[:12]


def fib(k):
    return k if k < 2 else fib(k - 1) + fib(k - 2)


def spin(seconds):
    import time
    end = time.process_time() + seconds
    while time.process_time() < end:
        fib(12)


mode = sys.argv[1]
if mode == "child":
    gemm(2)
elif mode == "family":
    print("main", gemm(6), fib(15), flush=True)
    t = threading.Thread(target=gemm, args=(4,))
    t.start()
    t.join()
    pid = os.fork()
    if pid == 0:
        gemm(3)
        os._exit(5)
    print("fork child", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
    subprocess.run([sys.executable, __file__, "child"], check=True)
elif mode == "term":
    gemm(1)
    os.kill(os.getpid(), signal.SIGTERM)
elif mode == "spin":
    t = threading.Thread(target=spin, args=(0.4,))
    t.start()
    t.join()
    print("spun")
"""


def inside(root, command, timeout=300):
    return inside_root(root, command, timeout=timeout, home="/work313")


def _source_tarball():
    """python3.13's upstream tarball from Debian 13's source package, fetched once."""
    state = BUILD / "old-glibc-src"
    found = sorted(glob.glob(str(state / "src" / "python3.13_*.orig.tar.xz")))
    if found:
        return Path(found[-1])
    (state / "src").mkdir(parents=True, exist_ok=True)
    (state / "sources.list").write_text(
        f"deb-src [signed-by={KEYRING}] http://deb.debian.org/debian trixie main\n")
    apt = [str(Path(__file__).resolve().parents[2] / "scripts" / "private-apt.sh"), str(state)]
    for args in (["update"], ["source", "--download-only", "python3.13"]):
        r = subprocess.run(apt + args, cwd=state / "src", capture_output=True, text=True,
                           timeout=600)
        if r.returncode != 0 and "Temporary failure resolving" in r.stdout + r.stderr:
            pytest.skip("deb.debian.org cannot be reached for python3.13's source")
        assert r.returncode == 0, f"apt-get {args[0]}: {r.stdout[-2000:]}{r.stderr[-2000:]}"
    found = sorted(glob.glob(str(state / "src" / "python3.13_*.orig.tar.xz")))
    assert found, "apt-get source python3.13 gave no upstream tarball"
    return Path(found[-1])


def _build_cpython(root):
    tarball = _source_tarball()
    marker = root / PREFIX.lstrip("/") / ".complete"
    if marker.exists() and marker.read_text() == tarball.name:
        return
    src = root / "src"
    subprocess.run(["rm", "-rf", str(src), str(root / PREFIX.lstrip("/"))], check=True)
    src.mkdir()
    subprocess.run(["tar", "-xJf", str(tarball), "-C", str(src), "--strip-components=1"],
                   check=True, timeout=300)
    r = inside(root, f"cd /src && ./configure --prefix={PREFIX} --without-ensurepip "
                     f"> configure.log 2>&1 && make -j1 > make.log 2>&1 && "
                     f"make install > install.log 2>&1", timeout=1500)
    assert r.returncode == 0, (src / "make.log").read_text()[-3000:] if (
        src / "make.log").exists() else r.stderr
    subprocess.run(["rm", "-rf", str(src)], check=True)
    marker.write_text(tarball.name)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    py313 = dict(FOUND).get(13)
    if py313 is None or not PORTABLE:
        pytest.skip("needs pyenv's CPython 3.13 and a SONDE_PORTABLE build for the cp313 wheel")
    if not (BUILD / "python" / "sonde" / "_sonde.cpython-313-x86_64-linux-gnu.so").exists():
        pytest.skip("this build has no extension for CPython 3.13")
    root = make_root()
    _build_cpython(root)
    wheel = make_wheel(py313, tmp_path_factory.mktemp("dist"))
    subprocess.run(["rm", "-rf", str(root / "venv313"), str(root / "work313")], check=True)
    (root / "work313").mkdir()
    (root / "work313" / wheel.name).write_bytes(wheel.read_bytes())
    (root / "work313" / "prog.py").write_text(PROGRAM)
    r = inside(root, f"{PREFIX}/bin/python3.13 -m venv /venv313 && "
                     f"/venv313/bin/python -m pip install -q --no-index "
                     f"--disable-pip-version-check /work313/{wheel.name}")
    assert r.returncode == 0, r.stdout + r.stderr
    return root


def run(root, args, db=None):
    """prog.py ARGS in the venv, alone or under `python -m sonde ... -o DB`."""
    sonde = f"-m sonde {args[0]} -o /work313/{db} " if db else ""
    return inside(root, f"cd /work313 && /venv313/bin/python {sonde}prog.py {args[1]}")


def launch(db):
    return query(db, "SELECT DISTINCT value FROM run_info WHERE key = 'sonde.launch'")


def test_glibcs_own_files_do_not_send_the_launch_back_to_sonde_run(root):
    plain = run(root, (None, "family"))
    assert plain.returncode == 0, plain.stderr
    r = run(root, ("", "family"), "in.db")
    assert (r.returncode, r.stdout) == (0, plain.stdout), r.stderr
    db = root / "work313" / "in.db"
    assert launch(db) == [("in-process",)]
    assert query(db, "SELECT COUNT(*) FROM notes WHERE topic = 'launch'") == [(0,)]


def test_the_in_process_profile_is_the_re_exec_one(root):
    """Frames, native calls, threads and the processes of a fork and an exec'd child."""
    profiles = {}
    for flag, db in (("--in-process", "fam-in.db"), ("--re-exec", "fam-re.db")):
        r = run(root, (flag, "family"), db)
        assert r.returncode == 0, r.stderr
        profiles[flag] = root / "work313" / db
    assert launch(profiles["--in-process"]) == [("in-process",)]
    assert launch(profiles["--re-exec"]) == [("re-exec",)]
    shape = ("SELECT r.kind, r.name, SUM(n.calls) FROM nodes n JOIN routines r USING "
             "(routine_id) WHERE r.kind != 'python' OR r.name LIKE 'prog.py:%' GROUP BY 1, 2 "
             "ORDER BY 1, 2")
    processes = "SELECT origin, end_reason FROM processes ORDER BY 1, 2"
    threads = "SELECT COUNT(*) FROM threads t JOIN processes p USING (process_id) " \
              "WHERE p.parent_process_id IS NULL"
    for sql in (shape, processes, threads):
        assert query(profiles["--in-process"], sql) == query(profiles["--re-exec"], sql), sql
    db = profiles["--in-process"]
    assert routine_calls(db, "cblas_dgemm") == 6 + 4 + 3 + 2
    assert query(db, "SELECT SUM(n.calls) FROM nodes n JOIN routines r USING (routine_id) "
                     "WHERE r.name LIKE 'prog.py:%(fib)'") == [(1973,)]  # fib(15)'s calls
    assert query(db, threads) == [(2,)]
    assert sorted(o for o, _ in query(db, processes)) == ["child", "fork", "root"]


def test_a_signal_death_is_flushed(root):
    r = run(root, ("--in-process", "term"), "term.db")
    assert r.returncode == -15 or r.returncode == 143, r.stderr
    db = root / "work313" / "term.db"
    assert query(db, "SELECT end_reason FROM processes") == [("signal 15",)]
    assert routine_calls(db, "cblas_dgemm") == 1


def test_the_sampler_arms_a_thread_started_after_sonde(root):
    """CPython's pthread_create was bound before libsonde came: rebound, it arms the thread."""
    r = run(root, ("--in-process --sample 1000", "spin"), "spin.db")
    assert (r.returncode, r.stdout) == (0, "spun\n"), r.stderr
    db = root / "work313" / "spin.db"
    assert launch(db) == [("in-process",)]
    (spun,), = query(db, "SELECT SUM(s.count) FROM samples s JOIN nodes n USING (node_id) "
                         "JOIN threads t USING (thread_id) WHERE t.seq > 0")
    assert spun is not None and spun >= 100  # 0.4 s of CPU at 1 kHz
