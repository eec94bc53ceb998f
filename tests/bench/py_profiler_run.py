#!/usr/bin/python3
"""Runs a Python script under yappi or a no-op C profile hook, as `python3 -m cProfile` would.

  /usr/bin/python3 tests/bench/py_profiler_run.py yappi-wall|yappi-cpu|noop|noop-monitoring \
      script.py [args]

yappi-*: yappi.set_clock_type(wall|cpu); yappi.start(); the script as __main__; yappi.stop();
then yappi.get_func_stats() (after the script's own timing; nothing is written).
noop: _noop_profiler.start() (tests/bench/py_noop_profiler.c, built into <build>/tests/bench,
found through PYTHONPATH): a C profile function that returns at once, the floor that CPython's
profiling machinery sets for any profile hook.
noop-monitoring (3.12+): _noop_profiler.event, a C callback that returns at once, registered with
sys.monitoring's profiler id for the events sonde's default hook takes: that hook's floor.
"""

import runpy
import sys


class NoopMonitoring:
    EVENTS = ("PY_START", "PY_RESUME", "PY_THROW", "PY_RETURN", "PY_YIELD", "PY_UNWIND")

    def start(self):
        import _noop_profiler
        mon = sys.monitoring
        mon.use_tool_id(mon.PROFILER_ID, "noop")
        mask = 0
        for name in self.EVENTS:
            mon.register_callback(mon.PROFILER_ID, getattr(mon.events, name), _noop_profiler.event)
            mask |= getattr(mon.events, name)
        mon.set_events(mon.PROFILER_ID, mask)

    def stop(self):
        sys.monitoring.set_events(sys.monitoring.PROFILER_ID, 0)
        sys.monitoring.free_tool_id(sys.monitoring.PROFILER_ID)


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("yappi-wall", "yappi-cpu", "noop",
                                                "noop-monitoring"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    which, script = sys.argv[1], sys.argv[2]
    sys.argv = [script, *sys.argv[3:]]
    if which == "noop":
        import _noop_profiler as prof
    elif which == "noop-monitoring":
        prof = NoopMonitoring()
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
    if which.startswith("yappi"):
        stats = prof.get_func_stats()
        sys.stdout.flush()
        print(f"yappi_functions {len(stats)}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
