"""The launcher's own lines. The program's standard streams are the user's: one may be closed
(`>&-`, so `sys.stderr` is None) or a pipe whose reader has gone, and nothing sonde says may keep
the program from running or change how it ends."""
import os
import sys


def say(message, error=False):
    """One line on stderr, or nothing where stderr cannot take it. SONDE_LOG=quiet keeps all
    but errors (what ends the launch) off it, as it keeps libsonde's warnings off (a red-team
    user's quiet run still printed the launcher's)."""
    stream = sys.stderr
    if stream is None or (not error and os.environ.get("SONDE_LOG") == "quiet"):
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
