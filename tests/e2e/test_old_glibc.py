"""The shipped binaries on an older system: Debian 11 (glibc 2.31, libstdc++ of GCC 10, Python
3.9 with numpy 1.19 on the reference BLAS), made with debootstrap, in a chroot. libsonde.so,
`sonde` and `sonde-view-server`, copied from this build as a wheel's kit lays them out, profile
numpy there and read the profile, where a build linked against the build machine's glibc 2.36
cannot start ("GLIBC_2.34 not found").

There, glibc has no _dl_find_object (2.35) and no _Fork (2.34): the walk through
dl_iterate_phdr (symbols/find_object.cpp), the rebinding pass's RELRO check, libunwind in the
sampler's place for the CFI walk, and the profile written by a child made with the clone system
call (a program holding every descriptor it may) all run for real. The version floor that
the build asks for (2.28) is checked on every binary as well; no glibc 2.28 system can be made
here (Debian 10 is gone from deb.debian.org), so 2.31 is the oldest one run.

Root only (debootstrap and chroot); the system is made once into the build directory (35 s,
about 300 MB) and kept (old_glibc_root.py). Python 3.9 has no sonde Python hook: native calls
only, which is what this test reads; test_old_glibc_python.py runs the hook there on a CPython
3.13 built in that system."""
import shutil
import sys
from pathlib import Path

import pytest

from conftest import CLI, LIB, query, routine_calls
from old_glibc_root import ROOT, inside, make_root

SOURCE = Path(__file__).resolve().parents[2]
BUILD = Path(CLI).resolve().parent.parent
sys.path.insert(0, str(SOURCE / "packaging" / "wheel"))
from elf_deps import needed, version_needs  # noqa: E402

NUMPY = """
import hashlib, numpy as np, sys
rng = np.random.RandomState(7)
a = rng.standard_normal((96, 96))
w = rng.standard_normal((96, 96))
for _ in range(int(sys.argv[1])):
    a = np.tanh(a @ w / 96.0)
print(hashlib.sha256(a.tobytes()).hexdigest())
"""

HOARD = """
import os
import numpy as np
a = np.ones((64, 64))
for _ in range(5):
    a = a @ a / 64.0
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
print("held", len(held) > 0, a[0, 0])
"""


@pytest.fixture(scope="module")
def root():
    make_root()
    # The kit as a wheel lays it out (sonde/_kit: bin/, lib/, share/sonde/viewer), from this build.
    kit = ROOT / "opt" / "sonde"
    shutil.rmtree(kit, ignore_errors=True)
    (kit / "bin").mkdir(parents=True)
    (kit / "lib").mkdir()
    for name in ("sonde", "sonde-view-server"):
        shutil.copy2(BUILD / "bin" / name, kit / "bin" / name)
    shutil.copy2(LIB, kit / "lib" / "libsonde.so")
    shutil.copytree(BUILD / "viewer" / "dist", kit / "share" / "sonde" / "viewer")
    work = ROOT / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    (work / "numpy_loop.py").write_text(NUMPY)
    (work / "hoard.py").write_text(HOARD)
    return ROOT


def test_the_binaries_ask_for_no_glibc_past_2_28_nor_any_libstdcxx():
    """Every shipped binary's needs: glibc symbol versions up to 2.28 (the wheel's
    manylinux_2_28), libstdc++ built in (no GLIBCXX_ or CXXABI_ version, no libstdc++.so.6)."""
    files = [BUILD / "bin" / "sonde", BUILD / "bin" / "sonde-view-server", Path(LIB)]
    files += sorted((BUILD / "python" / "sonde").glob("_sonde.cpython-*.so"))
    assert len(files) >= 4, files
    for f in files:
        versions = version_needs(str(f))
        assert "libstdc++.so.6" not in needed(str(f)), f
        assert not {"GLIBCXX", "CXXABI"} & set(versions), (f, versions)
        assert (2, 17) <= versions.get("GLIBC", (0,)) <= (2, 28), (f, versions)


def test_the_tool_starts_and_says_its_version(root):
    r = inside(root, "/opt/sonde/bin/sonde --version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("sonde "), r.stdout
    # The server refuses to be run by hand, in one line: it loaded and ran.
    r = inside(root, "/opt/sonde/bin/sonde-view-server")
    assert (r.returncode, r.stderr) == (
        2, "sonde-view-server: run by `sonde view FILES...`; see `sonde view --help`\n")


def test_numpy_under_sonde_gives_the_same_result_and_every_gemm(root):
    plain = inside(root, "python3 /work/numpy_loop.py 25")
    assert plain.returncode == 0, plain.stderr
    r = inside(root, "cd /work && /opt/sonde/bin/sonde run -o /work/np.db -- "
                     "python3 /work/numpy_loop.py 25")
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain.stdout, (r.stdout, plain.stdout)
    calls = routine_calls(root / "work" / "np.db", "cblas_dgemm")
    assert calls == 25
    report = inside(root, "/opt/sonde/bin/sonde report /work/np.db")
    assert report.returncode == 0, report.stderr
    assert "cblas_dgemm" in report.stdout
    html = inside(root, "/opt/sonde/bin/sonde view --html /work/np.html /work/np.db")
    assert html.returncode == 0, html.stderr
    assert (root / "work" / "np.html").stat().st_size > 10000


def test_samples_are_walked_by_libunwind_there(root):
    """No lock-free object lookup before glibc 2.35: the sampler hands every frame to
    libunwind, and the samples still land under the GEMMs' callers."""
    r = inside(root, "cd /work && /opt/sonde/bin/sonde run -o /work/samples.db --sample 2000 -- "
                     "python3 /work/numpy_loop.py 400")
    assert r.returncode == 0, r.stderr
    db = root / "work" / "samples.db"
    assert query(db, "SELECT COUNT(*) FROM samples")[0][0] > 0


def test_a_program_holding_every_descriptor_has_its_profile_written_by_a_child(root):
    """At the last flush no descriptor is left and the hard limit is the soft one: a child,
    made by the clone system call where glibc has no _Fork, writes the profile."""
    r = inside(root, "ulimit -n 64 && cd /work && /opt/sonde/bin/sonde run -o /work/hoard.db -- "
                     "python3 /work/hoard.py")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("held True"), r.stdout
    db = root / "work" / "hoard.db"
    assert routine_calls(db, "cblas_dgemm") == 5
