"""Cells every other group builds on: ordinary exits and deaths of a host, in both modes."""
import signal

import pytest

from conftest import calls, plain, preloaded, prog, profile_whole, same_behaviour, sonde_run

MODES = ["preload", "sonde-run"]


def under(mode, cmd, db, **kw):
    return preloaded(cmd, db, **kw) if mode == "preload" else sonde_run(cmd, db, **kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("code", [0, 3])
def test_exit_status(mode, code, db):
    """exit(CODE) after BLAS calls: same status and output, every call recorded"""
    cmd = [prog("exit_status"), code]
    same_behaviour(plain(cmd), under(mode, cmd, db))
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 10


@pytest.mark.parametrize("mode", MODES)
def test_quick_exit(mode, db):
    """quick_exit(4) after BLAS calls, one more in its handler: same status, every call recorded
    (libc's own _exit, past sonde's wrapper, had lost the process)"""
    cmd = [prog("exit_status"), 4, "quick"]
    alone = plain(cmd)
    assert alone.rc == 4
    same_behaviour(alone, under(mode, cmd, db))
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 11


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGABRT, signal.SIGSEGV])
def test_dies_of_signal(mode, sig, db):
    """death by a signal after BLAS calls: same signal, every call recorded"""
    cmd = [prog("exit_status"), 0, int(sig)]
    alone = plain(cmd)
    assert alone.rc == -sig
    same_behaviour(alone, under(mode, cmd, db))
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 10


@pytest.mark.parametrize("mode", MODES)
def test_a_small_stack_limit(mode, db):
    """`ulimit -s 64`: same output, every flush written (sonde's flusher thread took its stack
    size from RLIMIT_STACK, and a periodic flush overflowed it: the host died of SIGSEGV)"""
    cmd = ["/bin/bash", "-c", f"ulimit -s 64 && exec {prog('slow_gemms')} 1500"]
    alone = plain(cmd)
    assert alone.rc == 0
    same_behaviour(alone, under(mode, cmd, db, env_extra={"SONDE_FLUSH_INTERVAL": "0.1"}))
    profile_whole(db)
    assert calls(db, "cblas_sgemm") > 0
