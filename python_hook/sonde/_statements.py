"""The statements of a source file that span several lines, for `--lines` (frames.cpp): a
statement gives line events 4, 5, 4 (`x = f(a,\\n b)`: the call after its last argument's
line), and one run of it is one hit on each of its lines, not one a line event.

Asked once per file whose functions have their lines timed, from the hook's trace function
(tracing is off there), so it reads the file itself and never raises."""
import ast


def _header_end(node, first):
    """The last line of a compound statement's header (`if (a and\n b):`, a decorated
    `def` with its signature): the line before its body, or its first line."""
    body = node.cases[0].pattern if isinstance(node, ast.Match) and node.cases else (
        node.body[0] if node.body else None)
    return body.lineno - 1 if body is not None and body.lineno > first else first


def _compound(node):
    return isinstance(node, (ast.Match, ast.ExceptHandler, ast.match_case)) or any(
        isinstance(getattr(node, f, None), list) and getattr(node, f)
        and isinstance(getattr(node, f)[0], ast.stmt) for f in ("body", "orelse", "finalbody"))


def _spans(tree):
    for node in ast.walk(tree):
        if not isinstance(node, (ast.stmt, ast.ExceptHandler, ast.match_case)):
            continue
        first = node.pattern.lineno if isinstance(node, ast.match_case) else node.lineno
        for decorator in getattr(node, "decorator_list", None) or []:
            first = min(first, decorator.lineno)
        last = _header_end(node, first) if _compound(node) else (node.end_lineno or first)
        if last > first:
            yield first, last


def statement_starts(filename):
    """{line: first line of its statement} for each line of a statement (or a compound
    statement's header) that spans several lines; {} where the file cannot be read or
    parsed (a `<string>`, a file changed since, another language)."""
    try:
        with open(filename, "rb") as f:
            tree = ast.parse(f.read(), filename)
        starts = {}
        for first, last in _spans(tree):
            for line in range(first, last + 1):
                starts.setdefault(line, first)
        return starts
    except BaseException:  # noqa: BLE001 - never raise into the program being measured
        return {}
