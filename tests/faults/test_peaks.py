"""Cells for the peaks file that libsonde reads before the host's main (SONDE_PEAKS): what it
names may be no file at all, endless, or wrong; the host runs on and one stderr line says why."""
import os
import resource

import pytest

from conftest import (LIB, clean_env, plain, preloaded, prog, profile_whole, query, run,
                      same_behaviour)

CMD = [prog("exit_status"), 0]
# Far above what the host and OpenBLAS reserve, far below what an endless read would take.
ADDRESS_SPACE = 4 << 30


def limited():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def under(db, peaks):
    return preloaded(CMD, db, env_extra={"SONDE_PEAKS": peaks}, timeout=20, preexec_fn=limited)


def lines_naming(err, path):
    return [line for line in err.splitlines() if str(path) in line]


def stored_peaks(db):
    return query(db, "SELECT resource, threads, value FROM peaks ORDER BY resource, threads")


def test_fifo(tmp_path, db):
    """SONDE_PEAKS names a FIFO nobody writes: refused at once, the host runs"""
    fifo = tmp_path / "peaks.fifo"
    os.mkfifo(fifo)
    r = under(db, fifo)
    same_behaviour(plain(CMD), r)
    assert r.seconds < 10
    assert lines_naming(r.err, fifo) == [f"sonde: {fifo}: not a regular file; peaks not read"]
    profile_whole(db)
    assert stored_peaks(db) == []


def test_dev_zero(db):
    """SONDE_PEAKS=/dev/zero (endless, no newline): refused, memory does not grow"""
    r = under(db, "/dev/zero")
    same_behaviour(plain(CMD), r)
    assert lines_naming(r.err, "/dev/zero") == ["sonde: /dev/zero: not a regular file; peaks not read"]
    profile_whole(db)
    assert stored_peaks(db) == []


def test_oversized(tmp_path, db):
    """SONDE_PEAKS names a 1 MiB file: refused by size, the host runs"""
    big = tmp_path / "peaks.txt"
    big.write_text("gemm.f32 1 10 manual\n" + "#" * (1 << 20) + "\n")
    r = under(db, big)
    same_behaviour(plain(CMD), r)
    [line] = lines_naming(r.err, big)
    assert "over the 65536 a peaks file may have; peaks not read" in line
    profile_whole(db)
    assert stored_peaks(db) == []


def test_trailing_garbage(tmp_path, db):
    """a peaks line `gemm.f32 0 100abc`: rejected with its line number, good lines kept"""
    peaks = tmp_path / "peaks.txt"
    peaks.write_text("# by hand\ngemm.f32 0 100abc\ngemm.f32 1 50 manual\ngemm.f64 1 nan\n")
    r = under(db, peaks)
    same_behaviour(plain(CMD), r)
    assert lines_naming(r.err, peaks) == [
        f"sonde: {peaks}:2: value is not a number: gemm.f32 0 100abc (and 1 more lines ignored)"]
    profile_whole(db)
    assert stored_peaks(db) == [("gemm.f32", 1, 50.0)]


@pytest.mark.parametrize("named", ["default", "SONDE_PEAKS"])
def test_unreadable_home(named, other_user_dir):
    """a HOME this user cannot read (a service user, HOME=/root): the default cache is silently absent, a named file still said"""
    out = other_user_dir
    env = clean_env(HOME="/root")
    env.pop("SONDE_PEAKS")
    env.pop("XDG_CACHE_HOME", None)
    # Preloaded after setpriv: the process that is nobody from its start reads the peaks.
    sonde = [f"LD_PRELOAD={LIB}", f"SONDE_OUTPUT={out / 'prof.db'}"]
    if named == "SONDE_PEAKS":
        sonde.append("SONDE_PEAKS=/root/peaks.txt")
    r = run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", *sonde,
             *CMD], env=env)
    assert r.rc == 0 and r.out == plain(CMD).out
    said = [line for line in r.err.splitlines() if "peaks" in line]
    assert bool(said) == (named == "SONDE_PEAKS"), r.err
    profile_whole(str(out / "prof.db"))
