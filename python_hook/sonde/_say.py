"""The launcher's own lines. The program's standard streams are the user's: one may be closed
(`>&-`, so `sys.stderr` is None) or a pipe whose reader has gone, and nothing sonde says may keep
the program from running or change how it ends."""
import sys


def say(message):
    """One line on stderr, or nothing where stderr cannot take it."""
    stream = sys.stderr
    if stream is None:
        return
    try:
        stream.write(message + "\n")
        stream.flush()
    except (OSError, ValueError):
        pass


def flush_std():
    """Before an exec: what the launcher's streams hold goes out first, if it can."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
