"""The fault matrix's harness. Each test is one cell: a host program run without sonde and with it
(plain LD_PRELOAD or `sonde run`), checked for the same exit status and output, a profile that
passes PRAGMA integrity_check and `sonde report`, losses said in the file's notes, and no planted
secret anywhere in the file. At the end the cells are printed as a table (and written as markdown
to $SONDE_FAULTS_REPORT, which docs/reliability.md copies)."""
import os
import shutil
import signal
import sqlite3
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

LIB = os.environ.get("SONDE_LIB", "")
CLI = os.environ.get("SONDE_CLI", "")
BIN = Path(os.environ.get("SONDE_FAULTS_BIN", "."))
MLP = os.environ.get("SONDE_MLP", "")
PYTHON = "/usr/bin/python3"


def prog(name):
    """A host program of tests/faults/programs, built by CMake."""
    return str(BIN / name)


def clean_env(**extra):
    """The test's environment without sonde or preload state inherited from outside."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SONDE_") and k != "LD_PRELOAD"}
    env["SONDE_PEAKS"] = "/nonexistent/sonde-peaks.txt"
    env.update({k: str(v) for k, v in extra.items()})
    return env


@dataclass
class Run:
    rc: int
    out: str
    err: str
    seconds: float
    timed_out: bool = False


def run(cmd, timeout=60, input=None, env=None, cwd=None, preexec_fn=None):
    """Runs cmd to its end (or kills its process group at the timeout)."""
    start = time.monotonic()
    p = subprocess.Popen([str(c) for c in cmd], env=env, cwd=cwd, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace", start_new_session=True, preexec_fn=preexec_fn)
    try:
        out, err = p.communicate(input, timeout=timeout)
        return Run(p.returncode, out, err, time.monotonic() - start)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return Run(p.returncode, out, err, time.monotonic() - start, timed_out=True)


def plain(cmd, **kw):
    """The host alone."""
    env = clean_env(**kw.pop("env_extra", {}))
    return run(cmd, env=env, **kw)


def preloaded(cmd, db, **kw):
    """The host under LD_PRELOAD=libsonde.so, writing `db`."""
    env = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=db, **kw.pop("env_extra", {}))
    return run(cmd, env=env, **kw)


def sonde(*args, **kw):
    """The sonde CLI with `args` in a clean environment (run's keywords: timeout, input, ...)."""
    return run([CLI, *args], env=clean_env(), **kw)


def sonde_run(cmd, db, args=(), **kw):
    """The host under `sonde run -o db ARGS -- cmd`."""
    env = clean_env(**kw.pop("env_extra", {}))
    return run([CLI, "run", "-o", db, *args, "--", *cmd], env=env, **kw)


def in_process(script_and_args, db, **kw):
    """The Python host under `python3 -m sonde --in-process -o db SCRIPT ARGS`."""
    pythonpath = str(Path(os.environ.get("SONDE_BUILD", ".")) / "python")
    env = clean_env(PYTHONPATH=pythonpath, **kw.pop("env_extra", {}))
    return run([PYTHON, "-m", "sonde", "--in-process", "-o", db, *script_and_args], env=env, **kw)


def query(db, sql, params=()):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def notes(db):
    return [r[0] for r in query(db, "SELECT message FROM notes")]


def calls(db, routine):
    return query(db, "SELECT COALESCE(SUM(n.calls), 0) FROM nodes n JOIN routines r "
                     "USING (routine_id) WHERE r.name = ?", (routine,))[0][0]


def profile_whole(db):
    """The profile opens, passes integrity_check, and `sonde report` reads it. Returns the
    report's output."""
    assert Path(db).exists(), f"no profile at {db}"
    assert query(db, "PRAGMA integrity_check") == [("ok",)]
    rep = run([CLI, "report", db], env=clean_env())
    assert rep.rc == 0, f"sonde report failed: {rep.err}"
    return rep.out


def secrets_absent(db, secrets):
    """No planted secret in the file or anything SQLite left beside it (strings over the bytes)."""
    for path in [Path(db), *Path(db).parent.glob(Path(db).name + "-*")]:
        data = path.read_bytes()
        for s in secrets:
            assert s.encode() not in data, f"secret {s!r} stored in {path.name}"


def same_behaviour(alone, profiled):
    """The host's exit status and output are what they are without sonde."""
    assert not alone.timed_out, "the host hangs without sonde too"
    assert not profiled.timed_out, f"hung under sonde ({profiled.seconds:.0f} s)"
    assert profiled.rc == alone.rc, f"exit {profiled.rc} under sonde, {alone.rc} alone"
    assert profiled.out == alone.out, "output differs under sonde"


@pytest.fixture
def db(tmp_path):
    return str(tmp_path / "prof.db")


@pytest.fixture
def other_user_dir():
    """A folder under /tmp that any user may write, for a host that runs as another user
    (setpriv): pytest's own are root's alone (0700 above them). Skips without root and setpriv."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to run a host as another user")
    folder = Path(tempfile.mkdtemp(prefix="sonde-user-", dir="/tmp"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# The matrix: every test of this folder is a cell; its docstring's first line names the cell.
_cells = []


def pytest_runtest_logreport(report):
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _cells.append(report)


def _row(report, item_docs):
    group = report.nodeid.split("::")[0].removeprefix("test_").removesuffix(".py")
    doc = item_docs.get(report.nodeid, "") or report.nodeid.split("::")[-1]
    if report.passed:
        result = f"holds ({report.duration:.1f} s)"
    elif report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        result = "skipped: " + reason.removeprefix("Skipped: ")
    else:
        msg = report.longrepr.reprcrash.message if hasattr(report.longrepr, "reprcrash") else ""
        result = "FAILS: " + msg.splitlines()[0][:100] if msg else "FAILS"
    return group, doc, result


_docs = {}


def pytest_collection_modifyitems(items):
    for item in items:
        doc = (item.function.__doc__ or "").strip().splitlines()
        name = doc[0] if doc else item.name
        if hasattr(item, "callspec"):
            name += f" [{item.callspec.id}]"
        _docs[item.nodeid] = name


def pytest_terminal_summary(terminalreporter):
    rows = [_row(r, _docs) for r in _cells]
    if not rows:
        return
    held = sum(1 for r in _cells if r.passed)
    failed = sum(1 for r in _cells if r.failed)
    skipped = len(rows) - held - failed
    lines = ["| group | cell | result |", "| --- | --- | --- |"]
    lines += [f"| {g} | {d.replace('|', '/')} | {r.replace('|', '/')} |" for g, d, r in rows]
    lines.append("")
    lines.append(f"{held} of {len(rows)} cells hold, {failed} fail, {skipped} skipped.")
    tr = terminalreporter
    tr.write_sep("=", "fault matrix")
    for line in lines:
        tr.write_line(line)
    out = os.environ.get("SONDE_FAULTS_REPORT")
    if out:
        Path(out).write_text("\n".join(lines) + "\n")


def pytest_configure(config):
    missing = [n for n, v in (("SONDE_LIB", LIB), ("SONDE_CLI", CLI)) if not v]
    if missing:
        raise pytest.UsageError(f"run these tests through ctest: {', '.join(missing)} unset")
