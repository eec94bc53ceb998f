#!/usr/bin/python3
"""Runs a Python script under yappi or a no-op C profile hook, as `python3 -m cProfile` would.

  /usr/bin/python3 tests/bench/py_profiler_run.py yappi-wall|yappi-cpu|noop script.py [args]

yappi-*: yappi.set_clock_type(wall|cpu); yappi.start(); the script as __main__; yappi.stop();
then yappi.get_func_stats() (after the script's own timing; nothing is written).
noop: _noop_profiler.start() (tests/bench/py_noop_profiler.c, built into <build>/tests/bench,
found through PYTHONPATH): a C profile function that returns at once, the floor that CPython's
profiling machinery sets for any profile hook.
"""

import runpy
import sys


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("yappi-wall", "yappi-cpu", "noop"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    which, script = sys.argv[1], sys.argv[2]
    sys.argv = [script, *sys.argv[3:]]
    if which == "noop":
        import _noop_profiler as prof
    else:
        import yappi as prof
        prof.set_clock_type(which.split("-")[1])
    prof.start()
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        prof.stop()
    if which != "noop":
        stats = prof.get_func_stats()
        sys.stdout.flush()
        print(f"yappi_functions {len(stats)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
