#!/usr/bin/python3
"""Runs a Python script under yappi, as `python3 -m cProfile` runs one under cProfile.

  /usr/bin/python3 tests/bench/py_yappi_run.py {wall|cpu} script.py [args]

yappi.set_clock_type(CLOCK); yappi.start(); the script as __main__; yappi.stop(). The profile is
collected (yappi.get_func_stats()) after the script's own timing, and nothing is written.
"""

import runpy
import sys

import yappi


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("wall", "cpu"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    clock, script = sys.argv[1], sys.argv[2]
    sys.argv = [script, *sys.argv[3:]]
    yappi.set_clock_type(clock)
    yappi.start()
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    finally:
        yappi.stop()
    stats = yappi.get_func_stats()
    sys.stdout.flush()
    print(f"yappi_functions {len(stats)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
