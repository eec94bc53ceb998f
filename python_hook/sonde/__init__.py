"""sonde: profile Python programs together with the native libraries they call.

    python3 -m sonde -o prof.db train.py --steps 300
    python3 -m sonde -o prof.db -m package.module args

Python frames (file.py:LINE(function)) and intercepted native calls (BLAS, ...) go into one
calling-context tree per thread, written to a SQLite profile that the `sonde` CLI reads
(`sonde report prof.db`, `sonde tree prof.db`, ...).
"""

__all__ = ["start", "stop", "flush", "active"]


def _ext():
    from . import _sonde
    return _sonde


def start():
    """Records Python frames of every thread (libsonde must be preloaded)."""
    _ext().start()


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
