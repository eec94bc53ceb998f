"""The wheels (scripts/build-wheels.sh, packaging/wheel): for every CPython 3.10-3.13 found,
a fresh venv, `pip install --no-index` of the wheel for it, then the commands a new user runs
first, with no library of the build's on any path. Another check reads every ELF file of the
installed wheel: each library it needs resolves inside the venv or is on the manylinux list.

The wheels are made from this build (it must be SONDE_PORTABLE, as scripts/test.sh configures
it), one per interpreter whose extension the build holds; pyenv's interpreters are used for the
venvs (Debian's python3 has no venv module unless python3-venv is installed), so the cp311
wheel, built against Debian's 3.11, runs on another build of 3.11."""
import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CLI, MLP, clean_env, query

SOURCE = Path(__file__).resolve().parents[2]
BUILD = Path(CLI).resolve().parent.parent
sys.path.insert(0, str(SOURCE / "packaging" / "wheel"))
from elf_deps import ALLOWED, elves  # noqa: E402


def _cache(name):
    text = (BUILD / "CMakeCache.txt").read_text()
    m = re.search(rf"^{name}:\w+=(.*)$", text, re.M)
    return m.group(1) if m else ""


PORTABLE = _cache("SONDE_PORTABLE").upper() in ("ON", "1", "TRUE", "YES")


def interpreters():
    """(minor, python) for each pyenv CPython 3.10-3.13 with venv, one per minor version."""
    found = {}
    for py in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[0-3].*/bin/python3.1[0-3]"))):
        minor = re.search(r"python3\.(\d+)$", py).group(1)
        found.setdefault(int(minor), py)
    return sorted(found.items())


FOUND = interpreters()


def _params():
    if not FOUND:
        return [pytest.param(None, None, id="none", marks=pytest.mark.skip(
            reason="no pyenv CPython 3.10-3.13 here (~/.pyenv/versions)"))]
    return [pytest.param(minor, py, id=f"cp3{minor}") for minor, py in FOUND]


def make_wheel(py, dist):
    """The wheel for interpreter `py`, made from this build into `dist`: its path."""
    r = subprocess.run(
        [py, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import sonde_wheel; "
                   "print(sonde_wheel.build_wheel(sys.argv[2], {'build-dir': sys.argv[3], "
                   "'skip-build': '1'}))",
         str(SOURCE / "packaging" / "wheel"), str(dist), str(BUILD)],
        capture_output=True, text=True, timeout=300, env=clean_env())
    assert r.returncode == 0, r.stderr
    return Path(dist) / r.stdout.strip()


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    if not PORTABLE:
        pytest.skip(f"{BUILD} is not a SONDE_PORTABLE build (scripts/test.sh configures one)")
    dist = tmp_path_factory.mktemp("dist")
    made = {}
    for minor, py in FOUND:
        ext = BUILD / "python" / "sonde" / f"_sonde.cpython-3{minor}-x86_64-linux-gnu.so"
        if ext.exists():
            made[minor] = make_wheel(py, dist)
    return made


@pytest.fixture(scope="module")
def venvs(wheels, tmp_path_factory):
    """{minor: venv dir} with the wheel installed by pip, offline."""
    made = {}
    for minor, py in FOUND:
        if minor not in wheels:
            continue
        venv = tmp_path_factory.mktemp(f"venv3{minor}")
        subprocess.run([py, "-m", "venv", str(venv)], check=True, timeout=300, env=clean_env())
        r = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                            "--no-index", "--disable-pip-version-check", str(wheels[minor])],
                           capture_output=True, text=True, timeout=300, env=clean_env())
        assert r.returncode == 0, r.stdout + r.stderr
        made[minor] = venv
    return made


def _venv(venvs, minor):
    if minor is None or minor not in venvs:
        pytest.skip(f"this build has no extension for CPython 3.{minor}")
    return venvs[minor]


def venv_env(venv, **extra):
    """A user's shell in the activated venv: its bin first on PATH, nothing of the build's on
    PATH, LD_LIBRARY_PATH or PYTHONPATH."""
    env = clean_env(**extra)
    env.pop("PYTHONPATH", None)
    env["LD_LIBRARY_PATH"] = ""
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    env["VIRTUAL_ENV"] = str(venv)
    return env


def sh(venv, cmd, cwd, **extra):
    return subprocess.run(cmd, cwd=cwd, env=venv_env(venv, **extra), capture_output=True,
                          text=True, timeout=300)


PROGRAM = """\
def leaf(i):
    return i * 2

def work(n):
    return sum(leaf(i) for i in range(n))

if __name__ == "__main__":
    print(work(1234))
"""


@pytest.mark.parametrize("minor,py", _params())
def test_first_commands_in_a_fresh_venv(venvs, minor, py, tmp_path):
    venv = _venv(venvs, minor)
    (tmp_path / "script.py").write_text(PROGRAM)
    r = sh(venv, ["python", "-m", "sonde", "-o", "p.db", "script.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(sum(2 * i for i in range(1234)))
    calls = query(tmp_path / "p.db", "SELECT calls FROM hotspots WHERE routine LIKE '%(leaf)'")
    assert calls == [(1234,)]
    r = sh(venv, ["sonde", "report", "p.db"], tmp_path)
    assert r.returncode == 0 and "leaf" in r.stdout, r.stderr
    r = sh(venv, ["sonde", "view", "p.db", "--html", "p.html"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "p.html").stat().st_size > 10_000
    # sonde tune finds the Python hook inside the wheel as `sonde run --python` does: the
    # original's profile has the script's frames (it once looked beside the sonde binary only).
    r = sh(venv, ["sonde", "tune", "--repeat", "1", "--stages", "ftz", "-o", "tn", "--",
                  "python", "script.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert "hook's folder was not found" not in r.stdout + r.stderr
    calls = query(tmp_path / "tn" / "original.1.db",
                  "SELECT calls FROM hotspots WHERE routine LIKE '%(leaf)'")
    assert calls == [(1234,)]
    # A native program, its BLAS calls intercepted by the wheel's libsonde.so.
    r = sh(venv, ["sonde", "run", "-o", "c.db", "--", MLP, "--steps", "5"], tmp_path)
    assert r.returncode == 0, r.stderr
    gemms = query(tmp_path / "c.db", "SELECT SUM(calls) FROM hotspots WHERE routine LIKE '%gemm%'")
    assert gemms[0][0] and gemms[0][0] > 0


@pytest.mark.parametrize("minor,py", _params())
def test_every_library_resolves_inside_the_venv_or_the_manylinux_list(venvs, minor, py):
    venv = _venv(venvs, minor)
    package = next(venv.glob("lib/python3.*/site-packages/sonde"))
    files = elves(str(package))
    assert any(f.startswith("_sonde.cpython-3") for f in files), files
    assert "_kit/lib/libsonde.so" in files and "_kit/bin/sonde" in files
    for rel in files:
        out = subprocess.run(["ldd", str(package / rel)], capture_output=True, text=True,
                             env=venv_env(venv)).stdout
        for soname, path in re.findall(r"^\s*(\S+) => (\S+)", out, re.M):
            assert soname in ALLOWED or path.startswith(str(package)), f"{rel}: {soname} => {path}"
        assert "not found" not in out, f"{rel}:\n{out}"


@pytest.mark.parametrize("minor,py", _params())
def test_man_page_and_console_script(venvs, minor, py, tmp_path):
    venv = _venv(venvs, minor)
    assert (venv / "share" / "man" / "man1" / "sonde.1").exists()
    r = sh(venv, ["sonde", "--version"], tmp_path)
    assert r.returncode == 0 and "sonde" in r.stdout, r.stderr
    # The console script is Python, which ignores SIGPIPE and SIGXFSZ, and an ignored signal
    # stays so across exec: every command sonde run started had them ignored (`yes | head -1`
    # ended "Broken pipe" with status 1, not 141). The command sees them at default, as from a
    # shell.
    r = sh(venv, ["sonde", "run", "-o", "p.db", "--", "grep", "^SigIgn", "/proc/self/status"],
           tmp_path)
    assert r.returncode == 0, r.stderr
    ignored = int(r.stdout.split()[-1], 16)
    assert not ignored & (1 << 12) and not ignored & (1 << 24), r.stdout  # SIGPIPE, SIGXFSZ
    r = sh(venv, ["bash", "-c", "sonde run -o y.db -- /usr/bin/yes | head -1; "
                  "echo ${PIPESTATUS[0]}"], tmp_path)
    assert r.stdout.split() == ["y", "141"], (r.stdout, r.stderr)


def test_an_interpreter_without_the_extension_is_refused_in_one_line(venvs, tmp_path):
    """The cp3X wheel's package run by another CPython: one line naming what the install
    supports, exit 2, no profile left (it was a 'circular import' and an empty profile)."""
    if len(venvs) < 2:
        pytest.skip("needs two interpreters' wheels")
    (minor, venv), (other, _) = sorted(venvs.items())[:2]
    other_py = dict(FOUND)[other]
    package = next(venv.glob("lib/python3.*/site-packages"))
    (tmp_path / "script.py").write_text(PROGRAM)
    r = subprocess.run([other_py, "-m", "sonde", "-o", "p.db", "script.py"], cwd=tmp_path,
                       env=clean_env(PYTHONPATH=str(package)), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"CPython 3.{other}" in lines[0] and f"supports CPython 3.{minor}" in lines[0]
    assert f"cp3{other}" in lines[0]
    assert not list(tmp_path.glob("*.db")), list(tmp_path.iterdir())


@pytest.mark.parametrize("minor,py", _params())
def test_a_child_imports_the_users_pythonpath_before_the_venvs_copy(venvs, minor, py, tmp_path):
    # The launchers put the venv's site-packages (the sonde package's folder) on PYTHONPATH
    # ahead of the user's: a child interpreter imported the installed copy of a module the
    # user's PYTHONPATH=src held (a red-team find).
    venv = _venv(venvs, minor)
    site = next(venv.glob("lib/python3.*/site-packages"))
    (site / "mypkgx_rt.py").write_text("WHO = 'installed'\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "mypkgx_rt.py").write_text("WHO = 'dev'\n")
    (tmp_path / "parent.py").write_text(
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'import mypkgx_rt; print(mypkgx_rt.WHO)'])\n")
    try:
        for cmd in (["python", "parent.py"], ["python", "-m", "sonde", "-o", "a.db", "parent.py"],
                    ["sonde", "run", "--python", "-o", "b.db", "--", "python", "parent.py"]):
            env = venv_env(venv)
            env["PYTHONPATH"] = str(tmp_path / "src")
            r = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=300)
            assert r.returncode == 0 and r.stdout == "dev\n", (cmd, r.stdout, r.stderr)
    finally:
        (site / "mypkgx_rt.py").unlink()


@pytest.mark.parametrize("minor,py", _params())
def test_a_child_in_another_venv_sees_none_of_the_launchers_packages(venvs, minor, py, tmp_path):
    # The autostart appended the sonde package's folder, the launcher venv's whole
    # site-packages, to a child's sys.path: a child in another venv imported the launcher
    # venv's packages (a red-team find: a 3.12 child took 3.11's pkg_resources and died).
    venv = _venv(venvs, minor)
    site = next(venv.glob("lib/python3.*/site-packages"))
    (site / "onlyhere_rt.py").write_text("WHO = 'launcher venv'\n")
    other = tmp_path / "other"
    subprocess.run([py, "-m", "venv", "--without-pip", str(other)], check=True, timeout=120)
    (tmp_path / "parent.py").write_text(
        "import subprocess, sys\n"
        f"child = {str(other / 'bin' / 'python')!r}\n"
        "code = 'try:\\n import onlyhere_rt; print(onlyhere_rt.WHO)\\n"
        "except ImportError: print(\"not there\")'\n"
        "subprocess.run([child, '-c', code])\n")
    try:
        for cmd in (["python", "parent.py"], ["python", "-m", "sonde", "-o", "a.db", "parent.py"],
                    ["sonde", "run", "--python", "-o", "b.db", "--", "python", "parent.py"]):
            r = subprocess.run(cmd, cwd=tmp_path, env=venv_env(venv), capture_output=True,
                               text=True, timeout=300)
            assert r.returncode == 0 and r.stdout == "not there\n", (cmd, r.stdout, r.stderr)
        # The child still runs the hook: its Python frames are in the profile.
        assert query(tmp_path / "a.db", "SELECT COUNT(*) FROM processes") == [(2,)]
        assert query(tmp_path / "a.db", "SELECT COUNT(*) FROM nodes n JOIN routines r USING "
                     "(routine_id) JOIN threads t USING (thread_id) JOIN processes p USING "
                     "(process_id) WHERE p.origin = 'child' AND r.kind = 'python'")[0][0] > 0
    finally:
        (site / "onlyhere_rt.py").unlink()


def test_a_child_of_a_python_the_install_lacks_says_why_it_has_no_hook(venvs, tmp_path):
    """A child interpreter of another CPython, for which this wheel has no extension: its
    profile's note says why its Python frames are missing. The failure was swallowed and the
    note told the user to run python3 -m sonde, as they had (a red-team find)."""
    if len(venvs) < 1 or len(FOUND) < 2:
        pytest.skip("needs a wheel and a second interpreter")
    minor, venv = sorted(venvs.items())[0]
    other, other_py = next((m, p) for m, p in FOUND if m != minor)
    (tmp_path / "parent.py").write_text(
        "import subprocess\n"
        f"subprocess.run([{other_py!r}, '-c', 'print(sum(range(10)))'], check=True)\n")
    r = subprocess.run(["python", "-m", "sonde", "-o", "p.db", "parent.py"], cwd=tmp_path,
                       env=venv_env(venv), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout == "45\n", r.stderr
    notes = query(tmp_path / "p.db", "SELECT n.message FROM notes n JOIN processes p USING "
                  "(process_id) WHERE n.topic = 'python-hook' AND p.origin = 'child'")
    assert len(notes) == 1, notes
    assert "whose sonde Python hook did not start" in notes[0][0], notes
    assert f"3.{other}" in notes[0][0] and "run it with python3 -m sonde" not in notes[0][0], notes
