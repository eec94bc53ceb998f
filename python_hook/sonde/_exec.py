"""Replacing this interpreter with sonde's own executable (the wheel's `sonde` command, the
re-exec under `sonde run`, `python3 -m sonde tune`) as a shell would start it: CPython ignores
SIGPIPE and SIGXFSZ from its start, and an ignored signal stays ignored across exec, so every
command `sonde run` started from the wheel's `sonde` had them ignored (`yes | head -1` ended
with "Broken pipe" and status 1, not killed by SIGPIPE with 141; a write past `ulimit -f`
failed with EFBIG instead of SIGXFSZ). They are set back to their defaults first, as
subprocess's restore_signals does for the programs Python starts."""
import os
# The C module: `signal` imports enum, 1.4 ms of every `python3 -m sonde` (an eighth of an empty
# script's run), for two constants used only as the interpreter is replaced.
import _signal

from ._say import flush_std


def exec_tool(path, argv, env=None):
    """execv/execve of `path` with stdio flushed and CPython's ignored signals at default."""
    flush_std()
    for name in ("SIGPIPE", "SIGXFSZ"):
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    if env is None:
        os.execv(path, argv)
    os.execve(path, argv, env)
