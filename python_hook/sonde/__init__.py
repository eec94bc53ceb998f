"""sonde: profile Python programs together with the native libraries they call.

    python3 -m sonde -o prof.db train.py --steps 300
    python3 -m sonde -o prof.db -m package.module args

Python frames (file.py:LINE(function)) and intercepted native calls (BLAS, ...) go into one
calling-context tree per thread, written to a SQLite profile that the `sonde` CLI reads
(`sonde report prof.db`, `sonde tree prof.db`, ...).
"""

import os

__all__ = ["start", "stop", "flush", "active"]


def _ext():
    from . import _sonde
    return _sonde


BUILTINS_ENV = "SONDE_PYTHON_BUILTINS"


def builtins_from_env(environ=None):
    """SONDE_PYTHON_BUILTINS as a bool (unset: False); ValueError for a value that is no bool."""
    value = (os.environ if environ is None else environ).get(BUILTINS_ENV, "0")
    if value in ("1", "yes", "true", "on"):
        return True
    if value in ("0", "no", "false", "off", ""):
        return False
    raise ValueError(f"{BUILTINS_ENV}={value!r} is not a boolean (1/0, yes/no, true/false, on/off)")


def start(builtins=None):
    """Records Python frames of every thread (libsonde must be preloaded).

    builtins=False: Python frames only, through CPython 3.11's frame-evaluation hook or 3.12's
    sys.monitoring (the cheapest); True: C functions (builtins, numpy.dot) too, through
    sys.monitoring on 3.12+ and CPython's profile function on 3.11; None: as
    SONDE_PYTHON_BUILTINS says. Returns the hook used: 'eval_frame', 'monitoring' or 'profile'."""
    if builtins is None:
        builtins = builtins_from_env()
    return _ext().start(builtins=builtins)


def stop():
    """Stops recording Python frames."""
    _ext().stop()


def flush():
    """Writes what was measured so far; True on success."""
    return _ext().flush()


def active():
    """True when libsonde is loaded into this process and recording."""
    try:
        return _ext().active()
    except ImportError:
        return False
