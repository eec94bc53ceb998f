"""The older system the portable binaries are tried on: Debian 11 (glibc 2.31, GCC 10, Python
3.9 with numpy 1.19 on the reference BLAS, libunwind8, and what building CPython there needs),
made with debootstrap into the build directory once and kept. test_old_glibc.py and
test_old_glibc_python.py share it; ctest may run them at once, so it is made under a lock."""
import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import CLI

BUILD = Path(CLI).resolve().parent.parent
ROOT = BUILD / "old-glibc-root"
SUITE = "bullseye"
PACKAGES = "python3-numpy,libunwind8,gcc,make,libc6-dev,libffi-dev,zlib1g-dev"


def make_root():
    """The system, made once (35 s); skips where the test cannot make or enter a chroot."""
    if os.geteuid() != 0:
        pytest.skip("makes and enters a chroot (root)")
    made = f"{SUITE} {PACKAGES}\n"
    with open(BUILD / "old-glibc-root.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        complete = ROOT / ".complete"
        if complete.exists() and complete.read_text() == made:
            return ROOT
        if shutil.which("debootstrap") is None:
            pytest.fail("debootstrap is missing: scripts/install-deps.sh installs it")
        shutil.rmtree(ROOT, ignore_errors=True)
        r = subprocess.run(["debootstrap", "--variant=minbase", f"--include={PACKAGES}", SUITE,
                            str(ROOT), "http://deb.debian.org/debian"],
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, \
            f"debootstrap {SUITE} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        complete.write_text(made)
    return ROOT


def inside(root, command, env=None, timeout=300, home="/work"):
    """`command` (a shell line) in the chroot, with its own /proc, in a mount namespace of its
    own, so nothing stays mounted after. `home`: each test module its own (pip's cache)."""
    line = (f"mount -t proc proc {root}/proc && exec chroot {root} /usr/bin/env -i "
            f"PATH=/usr/bin:/bin HOME={home} LANG=C.UTF-8 {env or ''} /bin/sh -c '{command}'")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", line],
                          capture_output=True, text=True, timeout=timeout)
