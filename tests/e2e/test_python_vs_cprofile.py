"""Call counts held against cProfile's, run by the same interpreter on the same program: every
function of the program that cProfile counts as cProfile does (methods, properties, class and
static methods, lambdas, comprehensions, recursion, exceptions raised through frames,
functions inside sonde regions), and in --builtins mode the builtins they call too. On every
CPython whose default hook is frame evaluation: Debian's 3.11 and pyenv's 3.10, where present.

Generators and coroutines are the exception: cProfile counts every resumption as a call, sonde
counts each generator once (its first next()), so they are held against the program's own
count. cProfile sees only the thread it was enabled on: threads are test_python.py's."""
import subprocess
import textwrap

import pytest

from conftest import clean_env, integrity_ok, query
from test_python import EVAL_FRAME_PYTHONS, PYTHONPATH, tree_is_consistent

PROGRAM = textwrap.dedent("""\
    import asyncio
    import sonde


    class Vec:
        def __init__(self, x):
            self.x = x

        def __add__(self, other):
            return Vec(self.x + other.x)

        def __getitem__(self, i):
            return self.x

        @property
        def norm(self):
            return abs(self.x)

        @staticmethod
        def zero():
            return Vec(0)

        @classmethod
        def one(cls):
            return cls(1)


    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)


    def boom(i):
        if i % 3 == 0:
            raise ValueError(i)
        return i


    def catcher(i):
        try:
            return boom(i)
        except ValueError:
            return -1


    def deep(n):
        if n == 0:
            raise RuntimeError("bottom")
        return deep(n - 1)


    def gen(n):
        for i in range(n):
            yield i


    async def fetch(i):
        await asyncio.sleep(0)
        return i


    async def gather():
        return await asyncio.gather(*[fetch(i) for i in range(6)])


    def key(x):
        return -x


    @sonde.region("step")
    def step(items):
        with sonde.region("inner"):
            return sorted(items, key=key)


    def hot(n):
        total = 0
        for i in range(n):
            total += i
        return total


    def main():
        fib(15)
        for i in range(30):
            catcher(i)
        for _ in range(5):
            try:
                deep(10)
            except RuntimeError:
                pass
        v = Vec.zero()
        for _ in range(20):
            v = v + Vec.one()
            v[0]
            v.norm
        total = sum(gen(10)) + sum(x for x in range(5)) + len([x * x for x in range(3)])
        for _ in range(4):
            step([3, 1, 2])
        inc = lambda y: y + 1
        for i in range(7):
            inc(i)
        unstarted = gen(3)   # dropped before its first next(): its body never runs
        del unstarted
        asyncio.run(gather())
        print(hot(40), total, v.x)


    main()
""")
# The program's own count where cProfile's counts resumptions.
RESUMED = {"gen": 1, "<genexpr>": 1, "fetch": 6, "gather": 1}
MODES = ["default", "builtins", "lines"]


def line_of(text):
    return PROGRAM.splitlines().index(text) + 1


def cprofile_counts(py, tmp_path):
    """{(file:LINE(name) as sonde names it, caller or None): calls} from cProfile, for the
    program's functions (caller None) and the builtins they call (caller: the function)."""
    stats = tmp_path / "cprofile.out"
    r = subprocess.run([py, "-m", "cProfile", "-o", str(stats), "prog.py"], cwd=tmp_path,
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    read = subprocess.run([py, "-c", textwrap.dedent("""\
        import os, pstats, sys
        def name(file, line, fn):
            if file == "~":  # a C function: "<built-in method builtins.len>"
                prefix = "<built-in method builtins."
                return "<built-in builtins." + fn[len(prefix):] if fn.startswith(prefix) else None
            return f"{os.path.basename(file)}:{line}({fn})" if file.endswith("prog.py") else None
        out = {}
        for k, (cc, nc, tt, ct, callers) in pstats.Stats(sys.argv[1]).stats.items():
            n = name(*k)
            if n is None:
                continue
            if not n.startswith("<built-in"):
                out[(n, None)] = nc
            for caller, (c_nc, *_) in callers.items():
                caller_name = name(*caller)
                if n.startswith("<built-in") and caller_name and caller_name.startswith("prog.py"):
                    out[(n, caller_name)] = out.get((n, caller_name), 0) + c_nc
        print(repr(out))
        """), str(stats)], capture_output=True, text=True, timeout=60)
    assert read.returncode == 0, read.stderr
    return eval(read.stdout), r.stdout


def sonde_builtin_counts(db):
    """{(builtin, the function of the program that called it): calls}, regions passed over."""
    out = {}
    for path, calls in query(db, "SELECT path, calls FROM callpaths WHERE path LIKE "
                                 "'prog.py:%<built-in builtins.%'"):
        frames = path.split(";")
        # Its caller: the nearest frame that is not a region (a plain name).
        caller = next(f for f in reversed(frames[:-1]) if f.endswith((")", ">")))
        if caller.startswith("prog.py:"):
            out[(frames[-1], caller)] = out.get((frames[-1], caller), 0) + calls
    return out


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("py", EVAL_FRAME_PYTHONS)
def test_call_counts_are_cprofiles(db, tmp_path, py, mode):
    (tmp_path / "prog.py").write_text(PROGRAM)
    reference, plain_out = cprofile_counts(py, tmp_path)
    opts = {"default": [], "builtins": ["--builtins"], "lines": ["--lines", "hot"]}[mode]
    r = subprocess.run([py, "-m", "sonde", "-o", str(db), *opts, "prog.py"], cwd=tmp_path,
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain_out
    assert integrity_ok(db) and tree_is_consistent(db)
    recorded = dict(query(db, "SELECT r.name, SUM(n.calls) FROM nodes n JOIN routines r "
                              "USING (routine_id) WHERE r.kind = 'python' AND r.name LIKE "
                              "'prog.py:%' GROUP BY r.name"))
    functions = {name: n for (name, caller), n in reference.items() if caller is None}
    compared = {name: n for name, n in functions.items()
                if name[name.index("(") + 1:-1] not in RESUMED}
    assert len(compared) >= 15, functions  # the program's functions, all seen by cProfile
    assert {name: recorded.get(name, 0) for name in compared} == compared
    resumed = {name: recorded.get(name, 0) for name in functions
               if name[name.index("(") + 1:-1] in RESUMED}
    assert {name[name.index("(") + 1:-1]: n for name, n in resumed.items()} == RESUMED
    if mode == "builtins":
        builtins = {k: n for k, n in reference.items() if k[1] is not None}
        assert {k for k, _ in builtins} >= {"<built-in builtins.sorted>",
                                            "<built-in builtins.abs>"}, builtins
        assert sonde_builtin_counts(db) == builtins
    else:
        assert query(db, "SELECT COUNT(*) FROM routines WHERE kind = 'builtin'") == [(0,)]
    # The regions hold the function and what it calls, as without the frame hook.
    regions = dict(query(db, "SELECT path, calls FROM callpaths WHERE path LIKE "
                             "'%;step;prog.py:%(step)%'"))
    # A decorated function's first line is its decorator's.
    step = "prog.py:%d(step)" % line_of('@sonde.region("step")')
    inner = [p for p in regions if p.endswith(f";step;{step};inner")]
    assert len(inner) == 1 and regions[inner[0]] == 4, regions
    if mode == "lines":
        hits = dict(query(db, "SELECT l.line, SUM(l.hits) FROM line_costs l JOIN routines r "
                              "USING (routine_id) WHERE r.name LIKE '%(hot)' GROUP BY l.line"))
        first = line_of("def hot(n):")
        assert (hits[first + 1], hits[first + 3], hits[first + 4]) == (1, 40, 1), hits
