"""The `sonde` console script of the wheel: the tool itself is the executable in the kit beside
this package (sonde/_kit/bin/sonde), which this replaces the interpreter with, as the cmake and
ninja wheels do, so signals, exit status and the terminal are the program's own."""
import os
import sys


def main():
    tool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kit", "bin", "sonde")
    from ._exec import exec_tool
    try:
        exec_tool(tool, ["sonde", *sys.argv[1:]])
    except OSError as e:
        print(f"sonde: cannot run {tool}: {e.strerror} (reinstall the sonde wheel)",
              file=sys.stderr)
        sys.exit(127)
