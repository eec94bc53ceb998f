"""Normalisation of sonde's outputs for the golden files (test_golden.py), as uftrace's tests
strip their outputs before comparing: what stays is the structure and the counts, so a change of
either shows as a diff, and what changes from run to run or machine to machine goes.

The rules, each with its reason:

1. Times and every figure derived from them are dropped: seconds, milliseconds, microseconds,
   nanoseconds, %time, per-call averages, a callgrind summary. They differ on every run.
2. Process and thread ids (pid, tid) are dropped: the kernel hands them out. The thread's index
   within its process (`thread 0`, the main thread) stays.
3. Rows whose order is by time are sorted: a tree's siblings (sonde lists them largest first), a
   report's or export's rows, a callgrind file's functions and calls. A tree's sections (one per
   thread) are sorted too: sonde lists processes by start time, and forked children start in
   whatever order the scheduler runs them.
4. Routine ids and call-path ids (`routine_id`, `path_ids`) are dropped: they number the routines
   in the order the wrapper tables declare them (then as first seen), an internal detail that a
   refactoring of the tables may change without changing what a user reads.
5. Absolute paths keep their last component: the checkout, the build and the Python install are
   somewhere else on each machine.
6. The line number of a Python frame is kept only in the test's own programs (`own`): those of
   the standard library and numpy move with every patch release, which is no change of sonde's.

Counts, names, kinds, libraries, call paths and the tree's shape are never touched.
"""
import csv
import io
import pstats
import re


def strip_path(text):
    """Rule 5: an absolute path as its last component."""
    return re.sub(r"(?<![\w.])/(?:[^/\s,;:()\[\]]+/)+([^/\s,;:()\[\]]+)", r"\1", text)


_FRAME = re.compile(r"^(?P<file>[^:;]+?):(?P<line>\d+)\((?P<func>.*)\)(?P<rest>( \[[\w-]+\])?)$")


def frame(name, own):
    """Rule 6 on one frame name, `file.py:LINE(func)` with an optional ` [kind]` after it."""
    m = _FRAME.match(name)
    if not m or m["file"] in own or m["line"] == "0":
        return name
    return f"{m['file']}:?({m['func']}){m['rest']}"


def path(text, own):
    """Rules 5 and 6 on a ';'-joined call path."""
    return ";".join(frame(strip_path(f), own) for f in text.split(";"))


# --- sonde tree (text) -------------------------------------------------------------------------

_SECTION = re.compile(r'^process \d+, thread (?P<n>\d+) \(tid \d+\) (?P<name>".*?"): .*$')
_COLUMNS = re.compile(r"^\s+incl %\s+incl s\s+excl s\s+calls\s+name$")
_ROW = re.compile(r"^\s*[\d.]+%\s+[\d.]+\s+[\d.]+\s+(?P<calls>[\d,]+)  (?P<rest>.*)$")
_BRANCH = re.compile(r"^(?P<bars>(?:│  |   )*)(?P<tee>├─ |└─ )?(?P<name>.*)$")
_IDS = re.compile(r"\(pid \d+, tid \d+\)")


def _canonical(node):
    """Sorts a subtree's siblings by their own subtrees, returned as nested tuples: two frames
    may share a name once rule 6 has taken their lines, so the name alone does not fix their
    order."""
    name, calls, children = node
    keyed = sorted(((_canonical(c), i) for i, c in enumerate(children)))
    children[:] = [children[i] for _, i in keyed]
    return (name, calls, tuple(k for k, _ in keyed))


def _render(node, lead, last, depth, out):
    name, calls, children = node
    tee = "" if depth == 0 else ("└─ " if last else "├─ ")
    out.append(f"{calls:>10}  {lead}{tee}{name}")
    below = lead + ("" if depth == 0 else ("   " if last else "│  "))
    for i, child in enumerate(children):
        _render(child, below, i == len(children) - 1, depth + 1, out)


def _section(lines, own):
    """One thread's tree: the header without its ids and time, the rows as calls and name, the
    siblings sorted by name (rules 1 to 3)."""
    out, roots, stack = [], [], []
    for line in lines:
        m = _SECTION.match(line)
        if m:
            out.append(f"process, thread {m['n']} {m['name']}")
            continue
        if _COLUMNS.match(line):
            out.append(f"{'calls':>10}  name")
            continue
        row = _ROW.match(line)
        if not row:
            out.append(_IDS.sub("(pid, tid)", line))
            continue
        b = _BRANCH.match(row["rest"])
        depth = len(b["bars"]) // 3 + (1 if b["tee"] else 0)
        node = (frame(b["name"], own), row["calls"], [])
        del stack[depth:]
        (stack[-1][2] if stack else roots).append(node)
        stack.append(node)
    for root in roots:
        _canonical(root)
        _render(root, "", True, 0, out)
    return out


def tree(text, own=()):
    """`sonde tree` text: sections (separated by blank lines) normalised, then sorted."""
    sections, current = [], []
    for line in text.splitlines():
        if line == "":
            if current:
                sections.append(current)
            current = []
        else:
            current.append(line)
    if current:
        sections.append(current)
    blocks = ["\n".join(_section(s, own)) for s in sections]
    return "\n\n".join(sorted(blocks)) + "\n"


# --- CSV outputs -------------------------------------------------------------------------------

def _csv(text, keep, own, fix):
    """The columns `keep` of a CSV text, each value through fix(value, column, row), the rows
    sorted."""
    rows = list(csv.DictReader(io.StringIO(text)))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(keep)
    body = sorted([fix(r[k], k, r) for k in keep] for r in rows)
    w.writerows(body)
    return out.getvalue()


def report_csv(text, own=()):
    """`sonde report --format csv`: calls, subroutine calls and what names the routine; rows
    sorted (rules 1, 3, 4)."""
    keep = ["name", "kind", "library", "file", "line", "calls", "subrs"]

    def fix(value, key, row):
        if key == "file":
            return strip_path(value)
        if key == "line":
            return value if value == "0" or strip_path(row["file"]) in own else "?"
        return frame(value, own) if key == "name" else value
    return _csv(text, keep, own, fix)


def callpaths_csv(text, own=()):
    """`sonde export --format csv` (the callpaths view): path and calls (rules 1, 3, 4, 6)."""
    return _csv(text, ["path", "calls"], own,
                lambda v, k, r: path(v, own) if k == "path" else v)


def folded(text, own=()):
    """`sonde export --format folded`: the stacks without their microseconds, sorted (rules 1,
    3). A stack whose exclusive time rounds to 0 us is not written at all, so only programs
    whose every call path takes well over a microsecond of its own have this golden file."""
    return "".join(sorted(path(line.rsplit(" ", 1)[0], own) + "\n"
                          for line in text.splitlines() if line))


_COMPRESSED = re.compile(r"^\((\d+)\)(?: (.*))?$", re.S)


def callgrind_names(text):
    """A callgrind file's lines with its compressed names resolved ("fl=(3) a.py" the first
    time, "fl=(3)" after; files and functions numbered apart): (key, name) pairs."""
    names = {"fl": {}, "fn": {}}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        space = {"fl": "fl", "cfl": "fl", "fi": "fl", "fe": "fl", "fn": "fn", "cfn": "fn"}.get(key)
        if space is None or not _:
            yield key, line
            continue
        m = _COMPRESSED.match(value)
        if m:
            if m[2] is not None:
                names[space][m[1]] = m[2]
            value = names[space][m[1]]
        yield key, value


def callgrind(text, own=()):
    """`sonde export --format callgrind`: each function with its calls (count and callee), no
    costs; functions and calls sorted (rules 1, 3, 5, 6)."""
    header, functions, current, call = [], [], None, None
    for key, value in callgrind_names(text):
        line = value if key not in ("fl", "fn", "cfl", "cfn") else f"{key}={value}"
        if line.startswith("summary:"):
            header.append("summary: <ns>")
        elif line.startswith("fl="):
            current = [strip_path(line), None, []]
            functions.append(current)
        elif line.startswith("fn="):
            current[1] = "fn=" + frame(line[3:], own)
        elif line.startswith("cfl="):
            call = [strip_path(line)]
            current[2].append(call)
        elif line.startswith("cfn="):
            call.append("cfn=" + frame(line[4:], own))
        elif line.startswith("calls="):
            call.append(line.split(" ")[0])  # the count; the position after it is the callee's
        elif current is None and line:
            header.append(line)
        # Anything else is a cost line ("position cost"): rule 1.
    blocks = sorted("\n".join([fl, fn] + sorted("\n".join(c) for c in calls)) + "\n"
                    for fl, fn, calls in functions)
    return "\n".join(header) + "\n\n" + "\n".join(blocks)


def pstats_file(file, own=()):
    """`sonde export --format pstats`, read back by Python's own pstats module: per function its
    call counts (all, primitive) and each caller's, sorted (rules 1, 3, 5, 6)."""
    stats = pstats.Stats(str(file)).stats

    def key(func):
        f, line, name = func
        f = strip_path(f)
        return f"{f}:{line if line == 0 or f in own else '?'}({name})"
    blocks = []
    for func, (cc, nc, _tt, _ct, callers) in stats.items():
        # A caller's figures are (calls, primitive calls, tt, ct), the function's own
        # (primitive, calls, ...): cProfile's order, which pstats keeps.
        lines = sorted(f"    <- {key(caller)} calls={c[0]} primitive={c[1]}\n"
                       for caller, c in callers.items())
        blocks.append(f"{key(func)} calls={nc} primitive={cc}\n" + "".join(lines))
    return "".join(sorted(blocks))
