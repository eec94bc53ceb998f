"""`--lines` hits held against line_profiler's (python3-line-profiler, Debian's 3.11) and against
counts known by construction on 3.12 and 3.13: a statement spread over several lines is one hit
on each of its lines, not one a line event (`f(a,\\n b)` gives line events 1, 2, 1), on
every CPython from 3.10 to 3.13.

line_profiler's report keeps one of the entries it holds for a line reached from several others
(its get_stats de-duplicates by line number): a loop header read n + 1 times (the test that ends
the loop) shows n there. sonde counts n + 1; the function below has no loop, so the two agree on
every line."""
import subprocess
import textwrap

import pytest

from conftest import clean_env, query
from test_python import PY, PYTHONPATH, other_pythons, python_params

CALLS = 700
PROGRAM = textwrap.dedent(f"""\
    def step(i):
        total = max(i,
                    3)
        d = {{"a": i,
             "b": i * 2}}
        xs = [i,
              i + 1,
              i + 2]
        if (d["a"] >= 0 and
                d["b"] >= 0):
            total += sum(
                xs
            )
        s = ("-".join(str(x) for x in xs)
             .upper()
             .strip())
        return total + len(s)


    def main():
        acc = 0
        for i in range({CALLS}):
            acc += step(i)
        print(acc)


    main()
    """)
# Lines of step() whose statements run once a call: every line from `total = max(i,` to the
# return but the `)` alone on line 13, which holds no instruction. (`for x in xs` runs inside
# the generator's own frame, not step's.)
LINES = set(range(2, 18)) - {13}

OTHERS = python_params(other_pythons([10, 12, 13])) or [
    pytest.param(None, id="python3.1x", marks=pytest.mark.skip(
        reason="no CPython 3.10, 3.12 or 3.13 here (~/.pyenv/versions/3.1*/bin/python3.1*)"))]


def sonde_hits(py, tmp_path, program=PROGRAM, function="step", stdout=None):
    """{line: hits} of `function` in `program` run by `py -m sonde --lines function`."""
    prog = tmp_path / "prog.py"
    prog.write_text(program)
    db = tmp_path / "lines.db"
    r = subprocess.run([py, "-m", "sonde", "-o", str(db), "--lines", function, str(prog)],
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and (stdout is None or r.stdout == stdout), r.stderr
    rows = query(db, "SELECT c.line, SUM(c.hits) FROM line_costs c JOIN routines r "
                     "USING (routine_id) WHERE r.name LIKE ? GROUP BY c.line", (f"%({function})",))
    return dict(rows)


def line_profiler_hits(tmp_path):
    """line_profiler 4 on the same program, run by the same interpreter (Debian's 3.11)."""
    runner = tmp_path / "lp.py"
    runner.write_text(textwrap.dedent("""\
        import line_profiler, sys
        source = open(sys.argv[1]).read().replace("\\nmain()\\n", "\\n")
        ns = {}
        exec(compile(source, sys.argv[1], "exec"), ns)
        lp = line_profiler.LineProfiler(ns["step"])
        ns["step"] = lp(ns["step"])
        with open("/dev/null", "w") as sys.stdout:
            ns["main"]()
        sys.stdout = sys.__stdout__
        for (_, _, name), entries in lp.get_stats().timings.items():
            for line, hits, _ in entries:
                print(line, hits)
        """))
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    r = subprocess.run([PY, str(runner), str(prog)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    if r.returncode != 0 and "No module named 'line_profiler'" in r.stderr:
        pytest.fail("python3-line-profiler is not installed (scripts/install-deps.sh)")
    assert r.returncode == 0, r.stderr
    return {int(a): int(b) for a, b in (l.split() for l in r.stdout.splitlines())}


def test_each_line_of_a_statement_is_one_hit_as_line_profiler_counts(tmp_path):
    ours = sonde_hits(PY, tmp_path)
    theirs = line_profiler_hits(tmp_path)
    assert ours == theirs
    assert ours == {line: CALLS for line in LINES}


@pytest.mark.parametrize("py", OTHERS)
def test_each_line_of_a_statement_is_one_hit_on_other_pythons(py, tmp_path):
    assert sonde_hits(py, tmp_path) == {line: CALLS for line in LINES}


def in_a_class(shape):
    """PROGRAM's step as a decorated static method of a class (indented 4), as it is, with a
    comment at column 0 inside it, or with a string whose lines reach column 0 (the block cannot
    be cut out then, and the whole file is read). Returns the program and {line: hits} known by
    construction: every line of step's statements once a call (LINES, moved)."""
    step = PROGRAM.split("\n\n\n")[0].splitlines()
    lines = ["class Model:", "    @staticmethod", "    @(lambda f: f)"]
    moved = {}
    for n, text in enumerate(step, start=1):
        # The comment before the dict over two lines (line events 4, 5, 4): a block cut off at
        # the comment would still parse, and its lines would be counted as two statements.
        if n == 4 and shape == "comment-at-column-0":
            lines.append("# a comment at column 0")
        if n == len(step) and shape == "string-at-column-0":  # before the return
            lines += ['        note = """', "a string at column 0", '"""']
            moved[len(lines) - 2] = CALLS  # its other lines hold no instruction
        lines.append("    " + text if text else text)
        if n in LINES:
            moved[len(lines)] = CALLS
    lines += ["", "", "def main():", "    acc = 0", f"    for i in range({CALLS}):",
              "        acc += Model.step(i)", "    print(acc)", "", "", "main()", ""]
    return "\n".join(lines), moved


@pytest.mark.parametrize("shape", ["indented", "comment-at-column-0", "string-at-column-0"])
def test_a_methods_statements_are_read_from_its_own_block(tmp_path, shape):
    """Only the timed function's block is parsed where it can be cut out of the file (the whole
    file's AST cost 10 ms per 1,000 lines at its first call); the hits are the same however it
    was read."""
    program, expected = in_a_class(shape)
    assert sonde_hits(PY, tmp_path, program, "step") == expected


LOOPS = textwrap.dedent("""\
    def rounds(n):
        i = 0
        acc = 0
        while i < n:
            i += 1
            d = {"a": i,
                 "b": i * 2}
            if (d["a"] > 3 and
                    d["b"] < 10**9):
                acc += sum(
                    v
                    for v in d.values()
                )
            ys = [v + 1
                  for v in range(3)]
            acc += len(ys)
        return acc


    print(rounds(500))
    """)


@pytest.mark.parametrize("py", [pytest.param(PY, id="python3.11")] + OTHERS)
def test_loops_count_a_hit_a_round_and_statements_inside_once(py, tmp_path):
    """A `while` test is a hit a round and once more at the end (3.11+ copy it below the body);
    a branch taken 497 times of 500 is 497 hits on each of its lines; 3.12's inlined
    comprehension, a loop inside one statement, is one hit a run of the statement."""
    hits = sonde_hits(py, tmp_path, LOOPS, "rounds", stdout="377232\n")
    assert hits == {2: 1, 3: 1, 4: 501, 5: 500, 6: 500, 7: 500, 8: 500, 9: 497, 10: 497, 12: 497,
                    14: 500, 15: 500, 16: 500, 17: 1}
