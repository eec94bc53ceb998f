"""sonde: profile Python programs together with the native libraries they call.

    python3 -m sonde -o prof.db train.py --steps 300
    python3 -m sonde -o prof.db -m package.module args

    import sonde
    with sonde.region("forward"):      # a frame of the tree, with the native calls beneath it
        ...
    @sonde.region("update")            # the region around every call
    def update(...): ...

Importing sonde in a program that does not run under sonde starts nothing, writes nothing and
says nothing: active() is False and regions cost a no-op.

Python frames (file.py:LINE(function)) and intercepted native calls (BLAS, ...) go into one
calling-context tree per thread, written to a SQLite profile that the `sonde` CLI reads
(`sonde report prof.db`, `sonde tree prof.db`, ...).
"""

import os

__all__ = ["start", "stop", "flush", "active", "region"]

_preloaded = None


def _libsonde_loaded():
    """True when libsonde.so is in this process (preloaded). Asked before the extension is
    imported: the extension links libsonde.so, so importing it elsewhere would load the library
    and start a profile of its own (a stray sonde-<pid>.db and a warning)."""
    global _preloaded
    if _preloaded is None:
        _preloaded = False
        if "libsonde" in os.environ.get("LD_PRELOAD", ""):
            try:
                with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
                    _preloaded = any("libsonde" in line for line in maps)
            except OSError:
                pass
    return _preloaded


def _ext():
    if not _libsonde_loaded():
        raise RuntimeError("libsonde is not loaded in this process (run through `python3 -m "
                          "sonde` or with LD_PRELOAD=libsonde.so)")
    try:
        from . import _sonde
    except ImportError:
        from ._support import unsupported
        reason = unsupported()
        if reason is None:
            raise
        raise RuntimeError(reason) from None
    return _sonde


BUILTINS_ENV = "SONDE_PYTHON_BUILTINS"
IMPORTS_ENV = "SONDE_PYTHON_IMPORTS"
IN_PROCESS_ENV = "SONDE_IN_PROCESS"


def builtins_from_env(environ=None):
    """SONDE_PYTHON_BUILTINS as a bool (unset: False). A value that is no bool is the default, as
    for every variable (the launcher says so once; it stopped the launch until 2026-12-05)."""
    from . import _env
    try:
        return _env.read(BUILTINS_ENV, environ)
    except ValueError:
        return False


def imports_from_env(environ=None):
    """SONDE_PYTHON_IMPORTS as a bool (unset: False: each import is one <import> node, what it
    runs folded into it). A value that is no bool is the default, as for libsonde's variables
    (the launcher says so once): it changes what is recorded, not what runs."""
    from . import _env
    try:
        return _env.read(IMPORTS_ENV, environ)
    except ValueError:
        return False


# The launcher's --lines patterns, for a start() the program makes itself (--paused).
_lines = ()


def start(builtins=None):
    """Records Python frames of every thread (libsonde must be preloaded).

    builtins=False: Python frames only, through CPython's frame-evaluation hook (3.10, 3.11) or
    sys.monitoring (3.12+; the cheapest); True: C functions (builtins, numpy.dot) too, through
    sys.monitoring on 3.12+ and CPython's profile function on 3.10 and 3.11; None: as
    SONDE_PYTHON_BUILTINS says. Returns the hook used: 'eval_frame', 'monitoring' or 'profile';
    None where sonde is not loaded (the program runs plainly: a `--paused` program's start()
    must not break it), as stop() and flush() do nothing there."""
    if not _libsonde_loaded():
        return None
    if builtins is None:
        builtins = builtins_from_env()
    return _ext().start(builtins=builtins, lines=_lines, imports=imports_from_env())


def stop():
    """Stops recording Python frames (nothing to do where sonde is not loaded)."""
    if _libsonde_loaded():
        _ext().stop()


def flush():
    """Writes what was measured so far; True on success (False where sonde is not loaded)."""
    return _ext().flush() if _libsonde_loaded() else False


def active():
    """True when libsonde is loaded into this process and recording."""
    try:
        return bool(_ext().active())
    except (ImportError, RuntimeError):
        return False


class _NoRegion:
    """region(name): a named region of sonde's calling-context tree (here a no-op: sonde is
    not loaded in this process; a decorated function is returned as it is)."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False

    def __call__(self, func):
        return func


# region(name): `with sonde.region("forward"): ...`, or `@sonde.region("update")` around every
# call of a function. Python frames and native calls made inside appear beneath it; regions
# nest. A region closes in the frame that opened it (not across a `yield` or `await`). Chosen
# once, here: a type whose calls no hook records (a function would add a frame per `with`), and
# where sonde is not loaded a no-op whose decorator returns the function itself.
def _bind_extension():
    """The extension's Region and stop in place of the Python ones: at import where sonde is
    loaded, and by the in-process launcher once it has loaded it (after this import)."""
    global region, stop
    region = _ext().Region
    # The extension's own stop: a Python stop() would leave its frames open in the tree (they
    # return after the hook is gone).
    stop = _ext().stop


region = _NoRegion
if _libsonde_loaded():
    # An extension that exists but does not load (an undefined symbol, an older libstdc++) leaves
    # `import sonde` working, its regions no-ops, as where sonde is not loaded: a program's own
    # `import sonde` failed with it, and python3 -m sonde --re-exec printed its traceback.
    # python3 -m sonde says it in one line (__main__._run).
    try:
        _bind_extension()
    except ImportError:
        pass
