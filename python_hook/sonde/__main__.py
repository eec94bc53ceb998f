"""python3 -m sonde [options] (script.py | -m MODULE | -c CMD) [args...]
python3 -m sonde tune [tune options] (script.py | -m MODULE | -c CMD) [args...]

Runs a Python program under sonde, as `python3 -m cProfile` does, with the program's native calls
intercepted too. Everything after the script, the module or the command belongs to the program,
options included. The interposition needs libsonde.so in the global symbol scope before numpy
or torch bind their BLAS: the launcher loads it into this interpreter before the program
imports anything (_in_process.py), installs the Python hook and runs the program as __main__.
Where that cannot give the profile `sonde run` would (-s, a library loaded before sonde), or
with --re-exec, the interpreter is started again under `sonde run` (which preloads libsonde.so,
forwards signals, says where the profile went and, with -s, prints the report), and that second
interpreter runs the program.
"""
import os
import sys

from ._exec import exec_tool
from ._say import say

_MARK = "SONDE_PYTHON_LAUNCHED"
# Why the default in-process launch could not be used: the started-again run's note.
_WHY = "SONDE_PYTHON_NOT_IN_PROCESS"

# cProfile's -s keys, and sonde report's own, as sonde report's --sort key.
_SORT_KEYS = {"tottime": "excl", "time": "excl", "excl": "excl",
              "cumtime": "incl", "cumulative": "incl", "incl": "incl",
              "ncalls": "calls", "calls": "calls", "pcalls": "pcalls",
              "name": "name", "stdname": "stdname", "nfl": "nfl", "file": "file",
              "filename": "filename", "module": "module", "line": "line"}
# sonde's options that take a value: the word after them is not the program.
_VALUED = ("-o", "--output", "--lines", "-s", "--sort", "--counters", "--flush-interval", "--sample",
           "--delay", "--steps", "--step-region")


def _version():
    try:
        from ._version import VERSION
    except ImportError:  # the sources, not a build
        VERSION = "unknown"
    return f"sonde {VERSION}"


def _parser():
    import argparse
    p = argparse.ArgumentParser(
        prog="python3 -m sonde",
        usage="python3 -m sonde [options] (script.py | -m MODULE | -c CMD) [args ...]",
        description="Profile a Python program: Python frames and native calls in one tree. "
                    "Everything after the script, -m MODULE or -c CMD is the program's, "
                    "options included, as with python3 -m cProfile.",
        epilog="`python3 -m sonde tune [options] (script.py | -m MODULE | -c CMD) [args ...]` "
               "runs the program again with each tuning knob and prints the measured table "
               "(python3 -m sonde tune --help). Environment variables (SONDE_*) are described "
               "by `sonde run --help` and `man sonde`.")
    p.add_argument("--version", action="version", version=_version())
    p.add_argument("-o", "--output", default="sonde.db",
                   help="profile to write (default: sonde.db)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument("-s", "--sort", choices=sorted(_SORT_KEYS), metavar="SORT",
                   help="print the flat profile (sonde report) when the program ends, sorted "
                        "by SORT: tottime/time/excl, cumtime/cumulative/incl, ncalls/calls, "
                        "pcalls, or ascending name/stdname/nfl/file/filename/module/line "
                        "(cProfile's names)")
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
    p.add_argument("--imports", action="store_true",
                   help="record the Python frames an import runs (module bodies and what they "
                        "call) beneath its <import> node; without it each import is one "
                        "<import> node with its time, which keeps import torch's about 24,000 "
                        "paths out of the profile (environment: SONDE_PYTHON_IMPORTS=1)")
    p.add_argument("--record-shapes", action="store_true",
                   help="with PyTorch: also record each operator's input shapes and dtypes per "
                        "call path, as torch.profiler's record_shapes (table op_shapes, `sonde "
                        "shapes`); libtorch then copies every operator's inputs, a cost of "
                        "about 1 us an operator (environment: SONDE_TORCH_SHAPES=1)")
    p.add_argument("--paused", action="store_true",
                   help="record no Python frames until the program calls sonde.start() (and "
                        "none after sonde.stop()), so that imports and set-up stay out of the "
                        "tree; native calls are recorded throughout")
    p.add_argument("--delay", metavar="S",
                   help="measure nothing (native calls, Python frames, regions) until S seconds "
                        "after the launch (every process of the run at once), then every call exactly "
                        "(SONDE_DELAY)")
    p.add_argument("--steps", metavar="N",
                   help="measure nothing until N steps have run: the window opens as the region "
                        "named by --step-region (sonde.region, NVTX, record_function) begins "
                        "for the (N+1)-th time (SONDE_STEPS)")
    p.add_argument("--step-region", metavar="NAME",
                   help="the region --steps counts (default: step)")
    p.add_argument("--trace", action="store_true",
                   help="also record every call as a timed event (SONDE_TRACE=1)")
    p.add_argument("--counters", metavar="EVENTS",
                   help="comma-separated PAPI events to count per call path (SONDE_COUNTERS)")
    p.add_argument("--sample", metavar="N",
                   help="also sample each thread's CPU time N times a second, with native "
                        "stacks (SONDE_SAMPLE_HZ)")
    p.add_argument("--flush-interval", metavar="SECONDS",
                   help="seconds between periodic flushes (SONDE_FLUSH_INTERVAL)")
    p.add_argument("--no-record-args", action="store_true",
                   help="record the program's name only, not its arguments (SONDE_RECORD_ARGS=0)")
    p.add_argument("--in-process", action="store_true",
                   help="load libsonde into this interpreter (the default): where that cannot "
                        "give the same profile (-s, a library loaded before sonde) say why on "
                        "stderr and start the program again under sonde run "
                        "(docs/python.md) (environment: SONDE_IN_PROCESS=1)")
    p.add_argument("--re-exec", action="store_true",
                   help="start the program again in a second interpreter under sonde run "
                        "instead of loading libsonde into this one: the launch before "
                        "in-process became the default, a second interpreter start "
                        "(environment: SONDE_IN_PROCESS=0)")
    p.add_argument("-m", dest="module", metavar="MODULE",
                   help="run a library module as a script, like python -m")
    p.add_argument("-c", dest="command", metavar="CMD",
                   help="run the program passed as a string, like python -c")
    return p


# Every long option of _parser(), those taking a value in _VALUED.
_LONG = ("--version", "--output", "--force", "--sort", "--lines", "--builtins", "--imports",
         "--record-shapes", "--paused",
         "--trace", "--counters", "--sample", "--flush-interval", "--no-record-args", "--help",
         "--delay", "--steps", "--step-region", "--in-process", "--re-exec")


def _split(argv, valued=_VALUED, longs=_LONG):
    """(sonde's options, the program: [script or MODULE or CMD, args...], '-m'/'-c'/None).
    As cProfile (optparse without interspersed arguments) and python itself: sonde's options
    end at the first word that is not one, at --, or at -m/-c and their value."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return argv[:i], argv[i + 1:], None
        if a in ("-m", "-c"):
            return argv[:i], argv[i + 1:], a
        if a[:2] in ("-m", "-c") and not a.startswith("--"):
            return argv[:i], [a[2:], *argv[i + 1:]], a[:2]  # -mMODULE, -cCMD
        if not a.startswith("-") or a == "-":
            return argv[:i], argv[i:], None
        i += 2 if "=" not in a and _option(a, longs) in valued else 1
    return argv, [], None


def _option(word, longs=_LONG):
    """The long option a word names, as argparse reads it: --name=value, or a prefix of one
    long option (--lin for --lines); any other word as it is."""
    if not word.startswith("--"):
        return word
    word = word.split("=", 1)[0]
    matches = [o for o in longs if o.startswith(word)]
    return word if word in longs or len(matches) != 1 else matches[0]


def _library():
    """libsonde.so: $SONDE_LIBRARY, else beside this package in the build or install tree."""
    explicit = os.environ.get("SONDE_LIBRARY")
    return explicit if explicit else _library_beside()


def _library_beside():
    """The libsonde.so of this package's build or install tree (the one its extension links)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for candidate in (os.path.join(here, "_kit", "lib", "libsonde.so"),         # a wheel
                      os.path.join(here, "..", "..", "lib", "libsonde.so"),     # <build>/python/sonde
                      os.path.join(here, "..", "..", "..", "libsonde.so")):     # <prefix>/lib/python3*/dist-packages/sonde
        if os.path.exists(candidate):
            return os.path.realpath(candidate)
    return None


def _cli(library):
    """The sonde executable of the same build or installation as libsonde.so (<dir>/../bin)."""
    beside = os.path.join(os.path.dirname(library), "..", "bin", "sonde")
    if os.access(beside, os.X_OK):
        return os.path.realpath(beside)
    import shutil
    return shutil.which("sonde")


def _fail(message, code=1):
    say(f"python3 -m sonde: {message}", error=True)
    sys.exit(code)


def _refuse_bad_values(opts):
    """An option's value its variable does not accept is a usage error, before anything runs:
    taken as the default, a typo in --delay or --steps profiled the whole run, start-up
    included, which the option was there to leave out (a red-team find). A variable set in the
    environment still falls back to its default with one line, as the README says."""
    from ._options import RUN_OPTIONS
    from . import _env
    if opts.output == "":  # "-o $OUT" of an unset variable: it read "is a directory"
        _fail("-o names no file (an empty value): name the profile's file", 2)
    for flag, name, flag_value in RUN_OPTIONS:
        value = getattr(opts, flag[2:].replace("-", "_"), None)
        why = _env.not_accepted(name, value) if value and not flag_value else None
        if why is not None:
            _fail(f"{flag} {value}: {why} (see python3 -m sonde --help)", 2)


def _tools(program, kind):
    """The script exists (or the program is -m/-c), and libsonde.so and the sonde executable
    are found: returns their paths, or ends with the error a user can act on."""
    # A pipe is a script too (/dev/stdin, bash's <(...), and "-", stdin itself), as to python.
    if kind is None and program[0] != "-" and not os.path.exists(program[0]):
        _fail(f"cannot open script {program[0]}: no such file", 2)
    lib = _library()
    given = os.environ.get("SONDE_LIBRARY")
    if lib is None or not os.path.exists(lib):
        # Set, it is the one looked for: "set SONDE_LIBRARY" read as if it were not.
        _fail(f"SONDE_LIBRARY={given}: no such file" if given else
              "cannot find libsonde.so (set SONDE_LIBRARY)")
    cli = _cli(lib)
    if cli is None:
        _fail(f"cannot find the sonde executable (looked beside {lib} and on PATH)" +
              (f"; is SONDE_LIBRARY={given} sonde's libsonde.so?" if given else ""))
    return lib, cli


def _launch(opts, program, kind, argv):
    """Starts the program again under sonde run (and exits), or returns once libsonde is loaded
    into this interpreter: main() then runs the program, so that its stack above __main__ is
    the same as in the started-again interpreter (traceback.extract_stack, inspect.stack)."""
    from . import BUILTINS_ENV, IMPORTS_ENV, _env
    # The variables the Python side reads: a bad value is the default, said once here, as
    # libsonde says its own (SONDE_PYTHON=maybe was taken as on, by no one said; a bad
    # SONDE_PYTHON_BUILTINS stopped the launch, against the README's rule).
    for name in ("SONDE_PYTHON", BUILTINS_ENV, IMPORTS_ENV):
        value = os.environ.get(name, "")
        why = _env.not_accepted(name, value) if value else None
        if why is not None:
            say(f"python3 -m sonde: ignoring {name}={value!r}: {why}; using the default "
                f"'{_env.SPECS[name][1]}'")
    lib, cli = _tools(program, kind)
    env = {"SONDE_LIBRARY": lib}  # sonde run preloads this one, whatever its own tree holds
    if opts.builtins:
        env[BUILTINS_ENV] = "1"  # child interpreters of the run record the same way
    if opts.imports:
        env[IMPORTS_ENV] = "1"
    if opts.record_shapes:
        env["SONDE_TORCH_SHAPES"] = "1"
    # Child interpreters of the run start the hook from sonde/autostart/sitecustomize.py, which
    # appends the package's folder to their sys.path itself, behind everything else.
    autostart = os.path.join(os.path.dirname(os.path.abspath(__file__)), "autostart")
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (autostart, os.environ.get("PYTHONPATH")) if p)
    from . import _in_process
    _in_process.refuse_program_file_as_output(opts.output, program)
    wanted = _in_process_wanted(opts)
    if wanted:
        why = _in_process.refusal(opts)
        if why is None:
            os.environ.update(env)
            by_name = os.path.realpath(lib) != _library_beside()
            if not _in_process.start(opts, lib, by_name, opts.output, kind, program):
                opts.paused = True  # sonde said why; the program runs as it would without it
            return
        # Asked for by name, the refusal is said now; by default the profile's note says it
        # (not for -s, whose report is sonde run's by design).
        if wanted == "asked":
            say(f"python3 -m sonde: not in-process ({why}): starting the program again under "
                "sonde run")
        elif not opts.sort:
            env[_WHY] = why
    env = {**os.environ, **env, _MARK: "1"}
    run = [cli, "run", "-o", opts.output]
    run += ["--force"] if opts.force else []
    run += ["--report", _SORT_KEYS[opts.sort]] if opts.sort else []
    from ._options import RUN_OPTIONS
    for flag, _, flag_value in RUN_OPTIONS:  # passed on as given: sonde run holds them to range
        value = getattr(opts, flag[2:].replace("-", "_"), None)
        if value:
            run += [flag] if flag_value else [flag, value]
    exec_tool(cli, [*run, "--", sys.executable, *_interpreter_options(), "-m", "sonde", *argv],
              env)


# Interpreter options that take their value as the next word (python3 --help).
_INTERPRETER_VALUED = ("-W", "-X", "--check-hash-based-pycs")
# Interpreter flags without a value, which may be joined (-OO, -Bu).
_INTERPRETER_FLAGS = set("bBdEiIOPqsSuvR")


def _interpreter_options():
    """The interpreter's own options before -m sonde (-O, -u, -W error, -X dev, ...), as given,
    for the interpreter started again: without them `python3 -O -m sonde` ran the program with
    assertions on. Read from sys.orig_argv; where its shape is not one this reads, rebuilt from
    sys.flags as multiprocessing does for its children."""
    orig = getattr(sys, "orig_argv", None) or []
    i = 1
    while i < len(orig):
        word = orig[i]
        if word.startswith("-m"):
            return orig[1:i]
        if word in _INTERPRETER_VALUED:
            i += 2
            continue
        if word[:2] in ("-W", "-X") or (word[:1] == "-" and len(word) > 1 and
                                        set(word[1:]) <= _INTERPRETER_FLAGS):
            i += 1
            continue
        break
    import subprocess
    return subprocess._args_from_interpreter_flags()


def _plain_orig_argv(program, kind):
    """sys.orig_argv as `python3 [options] PROGRAM` would have it, without -m sonde and its
    options: a program that starts itself again from it must not start sonde's launcher."""
    orig = getattr(sys, "orig_argv", None) or [sys.executable]
    return [orig[0], *_interpreter_options(), *([kind] if kind else []), *program]


# sonde tune's options that take a value.
_TUNE_VALUED = ("-o", "--output", "--repeat", "--stages", "--timeout", "--format")
_TUNE_LONG = ("--repeat", "--stages", "--output", "--timeout", "--format", "--help")


def _tune_parser():
    import argparse
    p = argparse.ArgumentParser(
        prog="python3 -m sonde tune",
        usage="python3 -m sonde tune [options] (script.py | -m MODULE | -c CMD) [args ...]",
        description="Run a Python program under sonde as it is and with each tuning knob, and "
                    "print the measured tuning-stage table (sonde tune; docs/tune.md). "
                    "Everything after the script, -m MODULE or -c CMD is the program's, options "
                    "included, as with python3 -m sonde.")
    p.add_argument("--repeat", metavar="N", help="runs per stage, interleaved with the "
                                                  "original's (default 3)")
    p.add_argument("--stages", metavar="LIST",
                   help="comma-separated stages: blas-threads, framework-threads, ftz, pinning, "
                        "all (default: every stage that applies here, then all)")
    p.add_argument("-o", "--output", metavar="DIR",
                   help="folder of the runs' profiles, outputs and tune.json (default sonde-tune)")
    p.add_argument("--timeout", metavar="S",
                   help="seconds after which a run is stopped and its stage failed (0: none)")
    p.add_argument("--format", choices=("text", "json", "csv"), help="table format (default text)")
    return p


def _tune_main(argv):
    """sonde tune on the interpreter running this, with the program given as python3 -m sonde
    takes it: the same split of options and program."""
    own, program, kind = _split(argv, _TUNE_VALUED, _TUNE_LONG)
    parser = _tune_parser()
    opts = parser.parse_args(own)
    if kind is not None and not program:
        parser.error(f"argument {kind}: expected one argument")
    if not program:
        parser.print_usage(sys.stderr)
        _fail("nothing to tune: give a script, -m MODULE or -c CMD", 2)
    lib, cli = _tools(program, kind)
    env = dict(os.environ)
    env["SONDE_LIBRARY"] = lib
    tune = [cli, "tune"]
    for flag, value in (("--repeat", opts.repeat), ("--stages", opts.stages),
                        ("-o", opts.output), ("--timeout", opts.timeout),
                        ("--format", opts.format)):
        tune += [flag, value] if value is not None else []
    # sonde tune puts the hook's folder on PYTHONPATH for an interpreter, so every run records
    # the Python frames as under python3 -m sonde.
    command = [sys.executable, *([kind] if kind else []), *program]
    exec_tool(cli, [*tune, "--", *command], env)


def _main_module(path, spec):
    """A fresh __main__ module, as the interpreter makes one for a script, -m or -c."""
    import types
    module = types.ModuleType("__main__")
    if path is not None:
        module.__file__ = path
    module.__builtins__ = __builtins__
    module.__annotations__ = {}  # the interpreter's __main__ has it (PEP 526), runpy's keeps it
    module.__spec__ = spec
    module.__package__ = spec.parent if spec is not None else None
    if spec is not None:
        module.__loader__ = spec.loader
        module.__cached__ = spec.cached  # as runpy sets it for -m
    else:  # what the interpreter gives a script (and no cache), or -c
        import importlib.machinery
        module.__loader__ = importlib.machinery.BuiltinImporter
        if path is not None:
            module.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
            module.__cached__ = None
    sys.modules["__main__"] = module  # pickle (multiprocessing) looks functions up here
    return module


def _safe_path():
    """-P (PYTHONSAFEPATH), 3.11 and later, which -I implies there; 3.10 has no such flag, but
    its -I adds no script folder either (with sonde it put one first: a json.py beside the
    script shadowed the standard library's, against -I's promise)."""
    return getattr(sys.flags, "safe_path", False) or bool(sys.flags.isolated)


def _set_path0(entry):
    """sys.path[0] as the interpreter sets it for the program; with -P (PYTHONSAFEPATH) it adds
    nothing, so sys.path[0] is then a real entry (PYTHONPATH's first) and stays."""
    if not _safe_path():
        sys.path[0] = entry


def _say_own_sonde_shadowed():
    """A module or package named sonde in the program's first folder on sys.path (a radiosonde
    project's sonde.py beside its script) is not what the program's `import sonde` gets here:
    the profiler's package is imported already (docs/python.md). Said in one line, on stderr; a
    red team's program failed on `module 'sonde' has no attribute 'altitude'` with no word."""
    first = sys.path[0] if sys.path and not _safe_path() else ""
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds this package
    if not first or os.path.realpath(first) == os.path.realpath(own):
        return
    for name in ("sonde.py", os.path.join("sonde", "__init__.py")):
        path = os.path.join(first, name)
        if os.path.exists(path):
            say(f"python3 -m sonde: the program's own {path} is not what its `import sonde` "
                "gets here (the profiler's package is, in its child interpreters too); rename "
                "it, or record the native calls alone with `sonde run -o prof.db -- python3 ...`")
            return


def _program(program, kind):
    """(code, __file__, spec), with sys.argv and sys.path[0] as python itself sets them."""
    import runpy
    if kind == "-m":
        # runpy's own lookup: packages run their __main__, errors read as python -m's do.
        try:
            name, spec, code = runpy._get_module_details(program[0])
        except ImportError as e:
            _fail(f"No module named {program[0]}" if not str(e) else str(e))
        sys.argv = [spec.origin, *program[1:]]
        try:
            _set_path0(os.getcwd())
        except OSError:  # the folder is gone: python -m then puts nothing first either
            pass
        return code, spec.origin, spec
    if kind == "-c":
        sys.argv = ["-c", *program[1:]]
        _set_path0("")
        code = compile(program[0], "<string>", "exec")
        # 3.13's interpreter gives linecache the command's text, so that its tracebacks show
        # the lines (`1/0` and its carets), as an entry under "<string>" with no time, which
        # checkcache keeps (3.13.0), and by the code object where linecache has a function for
        # it (later ones); without, a -c program's tracebacks under sonde had no source.
        if sys.version_info >= (3, 13):
            import linecache
            text = program[0]
            lines = [line + "\n" for line in text.splitlines()]
            linecache.cache["<string>"] = (len(text), None, lines, "<string>")
            register = getattr(linecache, "_register_code", None)
            if register is not None:
                register(code, text, "<string>")
        return code, None, None
    if program[0] == "-":  # the program on stdin, as `python -` reads it
        sys.argv = list(program)
        _set_path0("")
        return compile(sys.stdin.buffer.read(), "<stdin>", "exec"), "<stdin>", None
    # The interpreter names a script by its absolute path (not normalised: /cwd/./x.py), in
    # __file__ and in its code objects, and so in tracebacks; sys.argv[0] stays as given.
    path = program[0] if os.path.isabs(program[0]) else os.path.join(os.getcwd(), program[0])
    sys.argv = list(program)
    source = None
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            source = f.read()
    # A directory or zip file with a __main__.py (a zipapp; source can hold no NUL byte): the
    # interpreter puts it first on sys.path, even with -P, and runs its __main__ module.
    if source is None or (b"\0" in source and _is_zip(path)):
        if _safe_path():
            sys.path.insert(0, path)
        else:
            sys.path[0] = path
        try:
            name, spec, code = runpy._get_main_module_details()
        except ImportError:
            _fail(f"can't find '__main__' module in {program[0]!r}")
        return code, spec.origin, spec
    code = compile(source, path, "exec")
    _set_path0(_script_folder(path))
    return code, path, None


def _script_folder(path):
    """The script's folder as the interpreter finds it for sys.path[0] (CPython's
    _PyPathConfig_ComputeSysPath0): the link read once, then realpath(3) where it resolves, so a
    script run through a link in bin/ imports the modules beside its target, and /dev/stdin on
    a pipe gives /proc/self/fd."""
    try:
        link = os.readlink(path)
        if link.startswith(os.sep):
            path = link
        elif os.sep in link:
            path = os.path.join(os.path.dirname(path), link)
    except OSError:
        pass
    try:
        path = os.path.realpath(path, strict=True)
    except OSError:
        pass
    return os.path.dirname(path)


def _is_zip(path):
    import zipfile  # only for a file that is no source: its import is a few ms
    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def _drop_launch_path():
    """Takes off sys.path the folder _launch put before the user's PYTHONPATH for this
    interpreter (the autostart folder, whose sitecustomize has run), and off sys.meta_path
    that sitecustomize's finder of the sonde package (`sonde` is imported): the program sees
    the sys.path it would see alone, whose first entry under -P is the user's own. Child
    interpreters still get the autostart folder from the environment."""
    here = os.path.dirname(os.path.abspath(__file__))
    autostart = os.path.join(here, "autostart")
    if autostart in sys.path:
        sys.path.remove(autostart)
    finder = getattr(sys.modules.get("sitecustomize"), "SondeFinder", None)
    if finder is not None and finder in sys.meta_path:
        sys.meta_path.remove(finder)


def _own_frames_out(tb):
    """`tb` past the launcher's own frames."""
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    return tb


def _print_as_python_would(e):
    """What CPython's PyErr_Print does with an uncaught exception, without the launcher's
    frames: sys.last_type, last_value, last_traceback (and 3.12's last_exc) set first, which
    crash reporters and atexit handlers read (they were left unset), then sys.excepthook; a
    hook that fails or is gone said as CPython says it (they printed the launcher's frames)."""
    tb = _own_frames_out(e.__traceback__)
    e = e.with_traceback(tb)  # the hook prints e.__traceback__
    sys.last_type, sys.last_value, sys.last_traceback = type(e), e, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = e
    try:
        hook = sys.excepthook
    except AttributeError:
        sys.stderr.write("sys.excepthook is missing\n")
        sys.__excepthook__(type(e), e, tb)
        return
    try:
        hook(type(e), e, tb)
    except SystemExit:
        raise
    except BaseException as failed:
        sys.stderr.write("Error in sys.excepthook:\n")
        if failed.__context__ is e:  # raised in the launcher's except: no context in CPython's
            failed.__context__ = None
        failed_tb = _own_frames_out(failed.__traceback__)
        sys.__excepthook__(type(failed), failed.with_traceback(failed_tb), failed_tb)
        sys.stderr.write("\nOriginal exception was:\n")
        sys.__excepthook__(type(e), e, tb)


def _in_process_wanted(opts):
    """"asked" (--in-process, SONDE_IN_PROCESS=1), "default" (nothing said) or None (--re-exec,
    SONDE_IN_PROCESS=0): the command line over the environment, as for every option."""
    from . import IN_PROCESS_ENV, _env
    if opts.re_exec:
        return None
    if opts.in_process:
        return "asked"
    if not _env.is_set(IN_PROCESS_ENV):
        return "default"
    try:
        return "asked" if _env.read(IN_PROCESS_ENV) else None
    except ValueError as e:
        say(f"python3 -m sonde: {e}; loading sonde in-process (the default)")
        return "default"


def _run(opts, program, kind, in_process=False):
    import atexit

    try:
        from . import _sonde
    except ImportError as e:
        from ._in_process import extension_unloadable
        say(f"python3 -m sonde: {extension_unloadable(e)}", error=True)
        sys.exit(1)
    from . import builtins_from_env, imports_from_env
    os.environ.pop(_MARK, None)
    why = os.environ.pop(_WHY, None)
    if not in_process:
        _sonde.launched_again(why)
    builtins = builtins_from_env()
    imports = imports_from_env()
    sys.orig_argv = _plain_orig_argv(program, kind)
    try:
        code, path, spec = _program(program, kind)
    except Exception as e:  # a SyntaxError, a module's own error under -m: Python's message
        _print_as_python_would(e)
        sys.exit(1)
    _say_own_sonde_shadowed()
    module = _main_module(path, spec)
    # atexit runs last what was registered first. stop and record_facts (torch's thread count,
    # for libsonde's exit flush) are C functions, which no hook sees called from C. The
    # interpreter's teardown is a call of its own from the last of them to the final flush
    # (not for --paused: the program chose which frames are recorded).
    # First of all, so last: on CPython 3.10 with daemon threads left, the final flush before
    # the interpreter's teardown (module.cpp's flush_before_teardown); before it,
    # multiprocessing's helpers, named once the program's exit has run.
    atexit.register(_sonde.flush_before_teardown)
    atexit.register(_sonde.name_helpers)
    if not opts.paused:
        atexit.register(_sonde.teardown_begins)
    if in_process:
        # Last of all, as exit() begins under LD_PRELOAD: no periodic flush beside the
        # interpreter's own finalization; the final flush comes from C's atexit.
        atexit.register(_sonde.exit_begins)
    atexit.register(_sonde.stop)
    atexit.register(_sonde.record_facts)
    # The tree starts at the program's own <module>: the exec below, a C function, is not
    # recorded (skipped where the chosen hook sees C functions).
    from . import _frameworks
    _frameworks.install()
    sonde = sys.modules[__package__]
    sonde._lines = tuple(opts.lines)
    if not opts.paused:
        _sonde.startup_ends()
        _sonde.start(skip_exec=True, lines=opts.lines, builtins=builtins, imports=imports)
    try:
        try:
            exec(code, module.__dict__)
        finally:
            # What CPython does as a script or -c command ends, however it ends, before it
            # prints its error or runs the atexit functions (pythonrun.c's flush_io): stderr,
            # then stdout, their errors dropped; not for -m, which it runs through runpy.
            # Without it a log of both (`> log 2>&1`, nohup, a batch job's) had the traceback,
            # a sys.exit message or an atexit function's lines before the program's last
            # stdout lines (a red-team find). Inline: a launcher's function would be a frame.
            for stream in (sys.stderr, sys.stdout) if kind != "-m" else ():
                try:
                    stream.flush()
                except Exception:
                    pass
    except SystemExit as e:
        # The status the interpreter exits with (pythonrun.c's _Py_HandleSystemExit), for the
        # profile's exit.status: loaded in-process, libc's exit is not sonde's to see. No call
        # here (a launcher's call would be a frame): an int's low bits, else 1 (it is printed).
        if e.code is None:
            sonde._exit_status = 0
        else:
            try:
                sonde._exit_status = e.code & 0xff
            except TypeError:
                sonde._exit_status = 1
        raise  # the interpreter ends it exactly as it would have without sonde
    except BaseException as e:
        _print_as_python_would(e)
        if isinstance(e, KeyboardInterrupt):
            _sonde.die_of_sigint_at_exit()  # as CPython does, once finalized: signal 2
        else:
            sonde._exit_status = 1
        sys.exit(1)
    else:
        sonde._exit_status = 0


def _scan(own):
    """sonde's options as _parser() would read them, without importing argparse (its import
    and parser are a few ms of every run); None where argparse must answer: help, version, an
    unknown or ambiguous option, a missing or refused value."""
    opts = dict(output="sonde.db", force=False, sort=None, lines=[], builtins=False, imports=False,
                record_shapes=False,
                paused=False, trace=False, counters=None, sample=None, flush_interval=None,
                no_record_args=False, delay=None, steps=None, step_region=None, in_process=False,
                re_exec=False)
    i = 0
    while i < len(own):
        a, value = own[i], None
        name = _option(a)
        if a.startswith("--"):
            if "=" in a:
                value = a.split("=", 1)[1]
        elif a[:2] in ("-o", "-s"):
            name, value = {"-o": "--output", "-s": "--sort"}[a[:2]], a[2:] or None
            if value is not None and value.startswith("="):
                value = value[1:]  # argparse reads -o=x as -o x (and -o= as an empty value)
        if name not in _LONG or name in ("--help", "--version"):
            return None
        if name in _VALUED:
            if value is None:
                i += 1
                if i == len(own) or own[i].startswith("-"):
                    return None
                value = own[i]
            key = name[2:].replace("-", "_")
            if key == "lines":
                opts["lines"].append(value)
            elif key == "sort" and value not in _SORT_KEYS:
                return None
            else:
                opts[key] = value
        elif value is not None:
            return None  # --force=1: argparse's error
        else:
            opts[name[2:].replace("-", "_")] = True
        i += 1
    import types
    return types.SimpleNamespace(**opts)


def main():
    from ._support import unsupported
    reason = unsupported()
    if reason:
        _fail(reason, 2)
    argv = sys.argv[1:]
    # `tune` as the first word is the subcommand (a script named tune: ./tune, or -- tune).
    if argv[:1] == ["tune"] and os.environ.get(_MARK) != "1":
        _tune_main(argv[1:])
    own, program, kind = _split(argv)
    opts = _scan(own) if program else None
    if opts is None:  # argparse answers help, version, errors and nothing to run
        parser = _parser()
        opts = parser.parse_args(own)
        if kind is not None and not program:
            parser.error(f"argument {kind}: expected one argument")
        if not program:
            parser.print_usage(sys.stderr)
            _fail("nothing to run: give a script, -m MODULE or -c CMD", 2)
    if os.environ.get(_MARK) == "1":
        _drop_launch_path()
        _run(opts, program, kind)
    else:
        _refuse_bad_values(opts)
        _launch(opts, program, kind, argv)
        _run(opts, program, kind, in_process=True)


if __name__ == "__main__":
    main()
