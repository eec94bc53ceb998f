"""Writes help2man's --include file for sonde.1: each subcommand's own --help, the environment
variables (from `sonde env-table`, generated from libprof/include/sonde/options.hpp) and the
Python launcher's usage, so that `man sonde` says what `sonde SUB --help` does.

Usage: man_sections.py SONDE PYTHON PYTHONPATH OUT"""
import re
import subprocess
import sys

sonde, python, pythonpath, out = sys.argv[1:5]


def run(cmd, **env):
    return subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60,
                          env=dict(env, PATH="/usr/bin:/bin")).stdout


def roff(text):
    """Plain text as roff: backslashes doubled, a line's leading . or ' made literal."""
    lines = []
    for line in text.replace("\\", "\\e").splitlines():
        lines.append("\\&" + line if line.startswith((".", "'")) else line)
    return "\n".join(lines)


def markdown_cell(cell):
    return roff(re.sub(r"`([^`]*)`", r"\1", cell.strip()))


top = run([sonde, "--help"])
subcommands = re.findall(r"^  ([a-z][a-z-]*) {2,}", top.split("Subcommands:", 1)[1], re.M)
sections = ["[SUBCOMMANDS]"]
for sub in subcommands:
    sections += [f".SS {sub}", ".nf", roff(run([sonde, sub, "--help"])), ".fi"]

sections.append("[ENVIRONMENT]")
for row in run([sonde, "env-table"]).splitlines()[2:]:
    cells = row.strip().strip("|").split("|")
    if len(cells) < 3:
        continue
    name, default, meaning = cells[0], cells[1], "|".join(cells[2:])
    sections += [".TP", f"\\fB{markdown_cell(name)}\\fR"
                 + (f" (default {markdown_cell(default)})" if default.strip() else ""),
                 markdown_cell(meaning)]

launcher = run([python, "-m", "sonde", "--help"], PYTHONPATH=pythonpath)
sections += ["[PYTHON LAUNCHER]", ".nf", roff(launcher), ".fi"]

# The installed programs beside sonde, so that a page named for sonde-view-server (the .deb's link
# to this one) says what that program is.
sections += ["[FILES]",
             ".TP", "\\fBsonde-view-server\\fR",
             "The server of `sonde view', beside sonde in the same directory, which that command "
             "runs with its parsed options; it is not run by hand.",
             ".TP", "\\fB../lib/libsonde.so\\fR",
             "The library `sonde run' and `python3 -m sonde' preload into the profiled program."]

with open(out, "w", encoding="utf-8") as f:
    f.write("\n".join(sections) + "\n")
