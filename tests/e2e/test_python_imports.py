"""The import machinery folded: importlib's own frames (<frozen importlib._bootstrap*>) are one
"<import>" node per outermost entry into them. By default what an import runs (module bodies,
what they call) is folded into it too; with SONDE_PYTHON_IMPORTS=1 (--imports) it is recorded
beneath it. On 3.10 and 3.11 (frame-evaluation hook, profile function) and 3.12+
(sys.monitoring), both modes."""
import pytest

from conftest import query
from test_python import (MODES, PY, PYTHON_310, python_calls, python_params, script,
                         tree_is_consistent)
from test_python_monitoring import FOUND, sonde_py

PYTHONS = [pytest.param(PY, id="python3.11")] + python_params(PYTHON_310 + FOUND)

PROGRAM = """
    import importlib
    import sys

    import alpha              # runs alpha's body, which imports beta


    def main():
        for _ in range(5):
            importlib.import_module("gamma")   # the first imports, the others find it loaded
        print(alpha.VALUE, sys.modules["gamma"].HITS)


    main()
"""


def modules(tmp_path):
    script(tmp_path, "alpha.py", """
        import beta

        def setup():
            return len([1, 2, 3])

        VALUE = setup() + beta.VALUE
    """)
    script(tmp_path, "beta.py", "VALUE = 10\n")
    script(tmp_path, "gamma.py", "HITS = 1\n")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("py", PYTHONS)
def test_import_machinery_is_one_node_per_import(db, tmp_path, py, mode):
    modules(tmp_path)
    path = script(tmp_path, "imps.py", PROGRAM)
    r = sonde_py(py, [path], db, tmp_path, mode=mode, SONDE_PYTHON_IMPORTS="1")
    assert (r.returncode, r.stdout) == (0, "13 1\n"), r.stderr
    # No frame of importlib's own: they are folded into <import>.
    assert query(db, "SELECT COUNT(*) FROM routines WHERE name LIKE '<frozen importlib%'") == [(0,)]
    paths = dict(query(db, "SELECT path, calls FROM callpaths"))
    top = "imps.py:1(<module>);<import>"
    # `import alpha` once: importlib and sys were loaded before, and finding a loaded module in
    # sys.modules runs no Python code.
    assert paths[top] == 1, paths
    assert paths[top + ";alpha.py:1(<module>)"] == 1
    assert paths[top + ";alpha.py:1(<module>);alpha.py:4(setup)"] == 1
    assert paths[top + ";alpha.py:1(<module>);<import>;beta.py:1(<module>)"] == 1
    # importlib.import_module (not frozen) enters the machinery once per call: exact count.
    under = [p for p in paths if p.endswith("(import_module);<import>")]
    assert len(under) == 1 and paths[under[0]] == 5, paths
    assert paths[under[0] + ";gamma.py:1(<module>)"] == 1
    # Beneath <import>, only module bodies (and what they call): no C call of the machinery's.
    assert not [p for p in paths if "<import>;<built-in" in p], paths
    if mode == "builtins":
        assert paths[top + ";alpha.py:1(<module>);alpha.py:4(setup);<built-in builtins.len>"] == 1
    assert python_calls(db, "setup") == 1
    assert tree_is_consistent(db)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("py", PYTHONS)
def test_an_import_is_one_node_by_default(db, tmp_path, py, mode):
    """Without SONDE_PYTHON_IMPORTS, each outermost import is one <import> node with what it ran
    folded in: no module body, no function it called, not even their names in the profile;
    the program's own frames after the imports are recorded as ever."""
    modules(tmp_path)
    path = script(tmp_path, "imps.py", PROGRAM)
    r = sonde_py(py, [path], db, tmp_path, mode=mode)
    assert (r.returncode, r.stdout) == (0, "13 1\n"), r.stderr
    paths = dict(query(db, "SELECT path, calls FROM callpaths"))
    assert paths["imps.py:1(<module>);<import>"] == 1, paths
    under = [p for p in paths if p.endswith("(import_module);<import>")]
    assert len(under) == 1 and paths[under[0]] == 5, paths
    assert not [p for p in paths if "<import>;" in p], paths
    names = [n for (n,) in query(db, "SELECT name FROM routines WHERE kind = 'python'")]
    assert not [n for n in names if n.startswith(("alpha.py", "beta.py", "gamma.py"))], names
    assert [c for p, c in paths.items() if p.startswith("imps.py:1(<module>);imps.py:") and p.endswith("(main)")] == [1], paths
    assert tree_is_consistent(db)
