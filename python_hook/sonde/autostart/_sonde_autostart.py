"""Starts sonde's Python hook in every Python process of a `python3 -m sonde` run.

The launcher puts this directory on PYTHONPATH, so child interpreters (multiprocessing's spawn
workers, subprocess) record their Python frames too, not only their native calls. It first runs
the sitecustomize this one shadows, so the system's customisation still happens, and starts the
hook last: what runs before it (that sitecustomize, this module's own frames) is start-up, not
the program, and no frame of sonde's own package may be in a profile.

Only the sonde package is made importable here, by a finder at the end of sys.meta_path that
finds `sonde` alone in the folder holding it: a child interpreter's sys.path stays its own. On
PYTHONPATH that folder (a venv's whole site-packages) came before the standard library, the
user's own PYTHONPATH and the interpreter's site-packages, and a child imported a venv's copy of
a module the user's PYTHONPATH held, a backport over the standard library's module, and another
interpreter's pip; appended to sys.path, it still gave a child in another venv, or of another
Python, every package of the launcher's venv (a 3.12 child imported 3.11's pkg_resources and
died; red-team finds).
"""
import os
import sys

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class SondeFinder:
    """Finds the package `sonde`, and nothing else, where this module's package is; its
    submodules then come from the package's own __path__. Last on sys.meta_path: a sonde the
    interpreter finds on its own path comes first, as it did when the folder was appended."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name != "sonde" or path is not None:
            return None
        import importlib.machinery
        return importlib.machinery.PathFinder.find_spec(name, [_PACKAGE_PARENT])


sys.meta_path.append(SondeFinder)


def _hook_failed(e):
    """Why the hook did not start, into the profile's python-hook note through libsonde (the
    extension may be what is missing: no extension for this CPython in this install), and on
    stderr where that is a terminal or SONDE_LOG asks (a child says nothing on a stream its
    parent may read). It was swallowed, and the note told the user to run python3 -m sonde,
    which they had (a red-team find)."""
    why = str(e) or type(e).__name__
    try:
        import ctypes
        ctypes.CDLL(None).sonde_impl_python_hook_failed(why.encode("utf-8", "replace"))
    except Exception:
        pass
    stream = sys.stderr
    level = os.environ.get("SONDE_LOG")
    if stream is None or level == "quiet":
        return
    try:
        if stream.isatty() or level in ("warn", "info", "debug"):
            print(f"sonde: Python hook not started in pid {os.getpid()}: {why}", file=stream)
    except (OSError, ValueError):
        pass


def _start_hook():
    if os.environ.get("SONDE_PYTHON_LAUNCHED") == "1":
        return  # the launcher itself starts the hook, after its own frames
    if "libsonde" not in os.environ.get("LD_PRELOAD", ""):
        return
    try:
        from sonde import _env
        if not _env.read("SONDE_PYTHON"):
            return
    except ValueError:
        pass  # the library's rule for a bad value: its default (on), said by no one here
    except Exception as e:  # the package itself failed: no extension for this CPython
        _hook_failed(e)
        return
    try:
        import sonde
        from sonde import _sonde
        if _sonde.active():
            try:
                builtins = sonde.builtins_from_env()
            except ValueError:
                builtins = False  # the launcher refuses such a value; a child keeps the default
            try:
                imports = sonde.imports_from_env()
            except ValueError:
                imports = False
            from sonde import _frameworks
            _frameworks.install()
            import atexit
            atexit.register(_sonde.name_helpers)  # last: after the program's exit functions
            # From the last exit function to the final flush, and from the process's start to
            # the hook's: named as in the launcher's own process (a rank's or a spawned
            # worker's 0.3-0.5 s were the root's own time, "unmeasured" in the breakdown).
            atexit.register(_sonde.teardown_begins)
            atexit.register(_sonde.flush)  # dying of a signal after atexit skips libsonde's
            _sonde.startup_ends()
            _sonde.start(builtins=builtins, imports=imports)  # the last thing this module does
    except Exception as e:  # never break the program being measured
        _hook_failed(e)


def _chain():
    """Runs the sitecustomize this one shadows as the import would have, and leaves it as the
    module `sitecustomize` (this module's name ends there): a child that used its names
    (`sitecustomize.corp_setup()`) died of an AttributeError, sonde's module in its place (a
    red-team find)."""
    import importlib.machinery
    import importlib.util
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module  # as the import does, before the module runs
        spec.loader.exec_module(module)


# The hook starts whether or not the shadowed module raised; its error then reaches site.py,
# which says it as without sonde ("Error in sitecustomize; ..."): the child was unprofiled.
try:
    _chain()
finally:
    _start_hook()
