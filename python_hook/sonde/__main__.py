"""python3 -m sonde [options] script.py [args] | -m module [args]

Runs a Python program under sonde, like `python3 -m cProfile`, with the program's native calls
intercepted too. The interposition needs libsonde.so in the global symbol scope before numpy or
torch bind their BLAS, so this launcher re-executes the interpreter with LD_PRELOAD set (loading
it later, RTLD_GLOBAL, would miss libraries already loaded and bound); the second run installs
the Python hook and runs the program as __main__.
"""
import argparse
import os
import sys

_MARK = "SONDE_PYTHON_LAUNCHED"


def _parser():
    p = argparse.ArgumentParser(
        prog="python3 -m sonde",
        description="Profile a Python program: Python frames and native calls in one tree.",
        epilog="Environment variables (SONDE_*) are described in the README and by "
               "`sonde run --help`.")
    p.add_argument("-o", "--output", default="sonde.db",
                   help="profile to write (default: sonde.db)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument("--lines", action="append", default=[], metavar="PATTERN",
                   help="time each source line of the functions whose name matches PATTERN "
                        "(fnmatch, e.g. 'update_core*'; repeatable), like line_profiler; "
                        "see `sonde report --by line`")
    p.add_argument("--builtins", action="store_true",
                   help="also record calls of C functions (builtins, numpy.dot, ...) as frames, "
                        "through CPython's profile function (sys.monitoring on 3.12+); without "
                        "it only Python frames are recorded, through the much cheaper "
                        "frame-evaluation hook (sys.monitoring on 3.12+) "
                        "(environment: SONDE_PYTHON_BUILTINS=1)")
    p.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a library module as a script, like python -m")
    p.add_argument("target", nargs="?", help="the script to run (unless -m is given)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the program")
    return p


def _library():
    """libsonde.so: $SONDE_LIBRARY, else beside this package in the build or install tree."""
    explicit = os.environ.get("SONDE_LIBRARY")
    if explicit:
        return explicit
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "..", "..", "lib", "libsonde.so"),     # <build>/python/sonde
                      os.path.join(here, "..", "..", "..", "libsonde.so")):     # <libdir>/python3/dist-packages/sonde
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    return None


def _fail(message, code=1):
    print(f"python3 -m sonde: {message}", file=sys.stderr)
    sys.exit(code)


def _launch(opts, argv):
    from . import BUILTINS_ENV, builtins_from_env
    try:
        builtins_from_env()
    except ValueError as e:
        _fail(str(e), 2)
    lib = _library()
    if lib is None or not os.path.exists(lib):
        _fail("cannot find libsonde.so (set SONDE_LIBRARY)")
    if opts.module is None and opts.target is None:
        _fail("nothing to run: give a script or -m MODULE", 2)
    if opts.module is None and not os.path.isfile(opts.target):
        _fail(f"cannot open script {opts.target}: no such file", 2)
    output = os.path.abspath(opts.output)
    if not os.path.isdir(os.path.dirname(output)):
        _fail(f"cannot write {opts.output}: no such directory")
    if os.path.exists(output):
        if not opts.force:
            _fail(f"{opts.output} exists; use --force to overwrite it")
        for suffix in ("", "-journal", "-wal", "-shm"):
            if os.path.exists(output + suffix):
                os.remove(output + suffix)
    env = dict(os.environ)
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = lib + (":" + preload if preload else "")
    env["SONDE_OUTPUT"] = output
    if opts.builtins:
        env[BUILTINS_ENV] = "1"  # child interpreters of the run record the same way
    # Child interpreters of the run start the hook from sonde/autostart/sitecustomize.py.
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    autostart = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autostart")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (autostart, package_parent, env.get("PYTHONPATH")) if p)
    env.pop("SONDE_RUN_ID", None)  # a new run, even when launched from a profiled process
    env[_MARK] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "sonde", *argv], env)


def _main_module(code, path, spec):
    """A fresh __main__ module, as the interpreter makes one for a script or for -m."""
    import types
    module = types.ModuleType("__main__")
    module.__file__ = path
    module.__builtins__ = __builtins__
    module.__spec__ = spec
    module.__loader__ = spec.loader if spec is not None else None
    module.__package__ = spec.parent if spec is not None else None
    sys.modules["__main__"] = module  # pickle (multiprocessing) looks functions up here
    return module


def _run(opts):
    import atexit
    import runpy

    from . import _sonde, builtins_from_env
    os.environ.pop(_MARK, None)
    builtins = builtins_from_env()
    if opts.module is not None:
        # runpy's own lookup: packages run their __main__, errors read as python -m's do.
        try:
            name, spec, code = runpy._get_module_details(opts.module)
        except ImportError as e:
            _fail(f"No module named {opts.module}" if not str(e) else str(e))
        path = spec.origin
        # argparse takes the module's first argument for the script: give it back.
        sys.argv = [path, *([opts.target] if opts.target else []), *opts.args]
        sys.path.insert(0, os.getcwd())
    else:
        path = opts.target
        with open(path, "rb") as f:
            code = compile(f.read(), path, "exec")
        spec = None
        sys.argv = [path, *opts.args]
        sys.path[0] = os.path.dirname(os.path.abspath(path))
    module = _main_module(code, path, spec)
    # atexit runs last what was registered first: the SIGINT death after everything else, and
    # before it a flush, since dying of a signal skips libsonde's own exit flush.
    atexit.register(_die_if_interrupted)
    atexit.register(_sonde.flush)
    # The tree starts at the program's own <module>: the exec below, a C function, is not
    # recorded (skipped where the chosen hook sees C functions).
    _sonde.start(skip_exec=True, lines=opts.lines, builtins=builtins)
    try:
        exec(code, module.__dict__)
    except SystemExit:
        raise  # the interpreter ends it exactly as it would have without sonde
    except BaseException as e:
        # Reported as Python would, without the launcher's frame in the traceback.
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next
        sys.excepthook(type(e), e.with_traceback(tb), tb)  # it prints e.__traceback__
        if isinstance(e, KeyboardInterrupt):
            _interrupted.append(True)
        sys.exit(1)


_interrupted = []


def _die_if_interrupted():
    """CPython ends an uncaught KeyboardInterrupt by dying of SIGINT once finalized."""
    if _interrupted:
        import signal
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)


def _split_module_args(argv):
    """sonde's arguments, and with -m MODULE everything after the module, options included,
    for the module (as python -m and cProfile -m have it); ([], None) without -m."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "-m":
            return argv[:i + 2], argv[i + 2:]
        if a.startswith("-m") and not a.startswith("--"):
            return argv[:i + 1], argv[i + 1:]  # -mMODULE
        if a == "--" or not a.startswith("-"):
            break  # the script: argparse gives it all that follows
        i += 2 if a in ("-o", "--output", "--lines") else 1
    return argv, None


def main():
    argv = sys.argv[1:]
    own, module_args = _split_module_args(argv)
    opts = _parser().parse_args(own)
    if module_args is not None:
        opts.target, opts.args = None, module_args
    if os.environ.get(_MARK) == "1":
        _run(opts)
    else:
        _launch(opts, argv)


if __name__ == "__main__":
    main()
