"""Helpers for the end-to-end tests: run real programs under libsonde.so and read the profile
with Python's sqlite3 module (a reader independent of sonde's own analyzers)."""
import atexit
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

LIB = os.environ.get("SONDE_LIB", "")
CLI = os.environ.get("SONDE_CLI", "")
BIN = Path(os.environ.get("SONDE_E2E_BIN", "."))
MLP = os.environ.get("SONDE_MLP", "")

# OpenMPI 4 makes its session directory's top (/tmp/ompi.<host>.<uid>) by a check, then a mkdir
# that fails ("A call to mkdir was unable to create the desired directory ... File exists") when
# another mpirun makes it in between: 4 of 40 pairs of plain mpiruns started together under load.
# Each test process (ctest runs two at once) keeps its own; a test that starts two jobs at once
# gives each one its own (`ompi_session_base`).
OMPI_BASE = tempfile.mkdtemp(prefix="sonde-e2e-ompi-")
atexit.register(shutil.rmtree, OMPI_BASE, ignore_errors=True)


@contextlib.contextmanager
def read_only_directory(parent):
    """A read-only tmpfs mounted at parent/ro while the block runs (root only: skips the test
    elsewhere, or where no tmpfs can be mounted)."""
    if os.geteuid() != 0:
        pytest.skip("mounts a read-only file system (root)")
    ro = parent / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(ro)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield ro
    finally:
        subprocess.run(["umount", str(ro)], check=True)


def ompi_session_base(path):
    """Environment for one mpirun whose session directory lies under `path` (made here)."""
    os.makedirs(path, exist_ok=True)
    return {"OMPI_MCA_orte_tmpdir_base": str(path)}


def clean_env(**extra):
    """The test's environment without any sonde or preload state inherited from outside."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SONDE_") and k != "LD_PRELOAD"}
    # A peaks file of the machine's user must not leak into the profiles tests read.
    env["SONDE_PEAKS"] = "/nonexistent/sonde-peaks.txt"
    env.setdefault("OMPI_MCA_orte_tmpdir_base", OMPI_BASE)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd, db=None, timeout=300, **env):
    """Runs cmd, preloaded with sonde writing to `db` when given. Returns CompletedProcess."""
    e = clean_env(**env)
    if db is not None:
        e["LD_PRELOAD"] = LIB
        e["SONDE_OUTPUT"] = str(db)
    return subprocess.run([str(c) for c in cmd], env=e, capture_output=True, text=True,
                          timeout=timeout)


def sonde(*args, check=False, timeout=300, env=None, **env_vars):
    """Runs the sonde CLI with `args` in a clean environment (or `env`, as given), returning
    the CompletedProcess; `check` asserts it exited 0."""
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       env=env if env is not None else clean_env(**env_vars))
    if check:
        assert r.returncode == 0, r.stderr
    return r


def sonde_out(*args, **kw):
    """The stdout of a sonde command that must succeed."""
    return sonde(*args, check=True, **kw).stdout


def sonde_json(*args, **kw):
    """The document a sonde command prints with --format json."""
    return json.loads(sonde_out(*args, "--format", "json", **kw))


def query(db, sql, params=()):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def routine_calls(db, routine, process_id=None):
    sql = ("SELECT COALESCE(SUM(n.calls), 0) FROM nodes n JOIN routines r USING (routine_id) "
           "JOIN threads t USING (thread_id) WHERE r.name = ?")
    params = [routine]
    if process_id is not None:
        sql += " AND t.process_id = ?"
        params.append(process_id)
    return query(db, sql, params)[0][0]


def integrity_ok(db):
    return query(db, "PRAGMA integrity_check") == [("ok",)]


@pytest.fixture
def db(tmp_path):
    return tmp_path / "prof.db"


def pytest_configure(config):
    missing = [name for name, value in (("SONDE_LIB", LIB), ("SONDE_CLI", CLI)) if not value]
    if missing:
        raise pytest.UsageError(f"run these tests through ctest: {', '.join(missing)} unset")
