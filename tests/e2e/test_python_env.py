"""The Python side reads its SONDE_* variables by their declarations in sonde/options.hpp
(the generated sonde/_options.py) and by the library's rules (runtime/config.cpp): the same
words mean the same thing whichever side reads them. Before, `SONDE_PYTHON=off` counted as on
(only "0" was off) and `SONDE_TORCH_OPS=no` was refused as "not 0 or 1"."""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import CLI, clean_env, query

PY = "/usr/bin/python3"
BUILD = os.environ.get("SONDE_BUILD", "")
PYTHONPATH = os.path.join(BUILD, "python")


def env_module():
    sys.path.insert(0, PYTHONPATH)
    try:
        from sonde import _env, _options
    finally:
        sys.path.remove(PYTHONPATH)
    return _env, _options


def test_the_python_side_declares_what_sonde_env_table_declares():
    _, options = env_module()
    table = subprocess.run([CLI, "env-table"], capture_output=True, text=True, check=True).stdout
    for name, (kind, default, *_rest) in options.SPECS.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{name}` |"))
        shown = row.split(" | ")[1]
        assert shown == (f"`{default}`" if default else ""), (name, row)
    assert "SONDE_PYTHON" in options.SPECS and "SONDE_OUTPUT" not in options.SPECS


@pytest.mark.parametrize("word,value", [("1", True), ("yes", True), ("true", True), ("on", True),
                                        ("0", False), ("no", False), ("false", False),
                                        ("off", False)])
def test_booleans_are_the_librarys_words(word, value):
    env, _ = env_module()
    assert env.read("SONDE_PYTHON", {"SONDE_PYTHON": word}) is value
    assert env.read("SONDE_TORCH_OPS", {"SONDE_TORCH_OPS": word}) is value


def test_empty_is_unset_and_a_bad_value_names_the_variable_and_the_words():
    env, _ = env_module()
    assert env.read("SONDE_PYTHON", {"SONDE_PYTHON": ""}) is True  # the default, 1
    assert env.read("SONDE_TORCH_SHAPES", {}) is False
    assert not env.is_set("SONDE_IN_PROCESS", {"SONDE_IN_PROCESS": ""})
    with pytest.raises(ValueError, match=r"SONDE_TORCH_OPS='maybe' is not a boolean \(1/0"):
        env.read("SONDE_TORCH_OPS", {"SONDE_TORCH_OPS": "maybe"})
    assert env.read("SONDE_TORCH_THREADS", {"SONDE_TORCH_THREADS": "0"}) == 0
    assert env.read("SONDE_TORCH_THREADS", {"SONDE_TORCH_THREADS": "8"}) == 8
    for bad in ("65536", "-1", "1.5", "x", "nan"):
        with pytest.raises(ValueError, match="is not a number from 0 or 1 to 65535"):
            env.read("SONDE_TORCH_THREADS", {"SONDE_TORCH_THREADS": bad})


CHILD = """\
    import subprocess, sys
    def parent_work():
        return sum(range(1000))
    parent_work()
    subprocess.run([sys.executable, "-c", "def child_work():\\n    return 1\\nchild_work()"],
                   check=True)
"""


@pytest.mark.parametrize("word,child_hooked", [("off", False), ("no", False), ("on", True)])
def test_sonde_python_keeps_the_hook_out_of_child_interpreters_by_any_word(tmp_path, word,
                                                                           child_hooked):
    (tmp_path / "prog.py").write_text(textwrap.dedent(CHILD))
    r = subprocess.run([PY, "-m", "sonde", "-o", "prof.db", "prog.py"], cwd=tmp_path,
                       env=clean_env(PYTHONPATH=PYTHONPATH, SONDE_PYTHON=word),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    db = tmp_path / "prof.db"
    assert query(db, "SELECT COUNT(*) FROM routines WHERE name LIKE '%(parent_work)'") == [(1,)]
    child = query(db, "SELECT COUNT(*) FROM routines WHERE name LIKE '%(child_work)'")
    assert child == [(1 if child_hooked else 0,)]
    assert query(db, "SELECT COUNT(*) FROM processes") == [(2,)]  # the child is in the run


@pytest.mark.parametrize("launch", [[], ["--re-exec"]], ids=["in-process", "re-exec"])
def test_an_extension_that_does_not_load_is_one_line_not_a_traceback(tmp_path, launch):
    # A wheel's extension or libsonde that is there but does not load (an undefined symbol, as a
    # red-team wheel built across a source change had; a libstdc++ older than its own) ended
    # python -m sonde in a Python traceback, and under --re-exec made `import sonde` itself fail.
    import shutil
    package = tmp_path / "pkg" / "sonde"
    shutil.copytree(os.path.join(PYTHONPATH, "sonde"), package)
    for ext in package.glob("_sonde.cpython-*.so"):
        ext.write_bytes(b"")  # "file too short"
    (tmp_path / "one.py").write_text("import sonde\nwith sonde.region('r'):\n    print(1)\n")
    env = clean_env(PYTHONPATH=tmp_path / "pkg",
                    SONDE_LIBRARY=os.path.join(BUILD, "lib", "libsonde.so"))
    r = subprocess.run([PY, "-m", "sonde", *launch, "-o", str(tmp_path / "p.db"), "one.py"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and r.stdout == "", (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    said = [l for l in r.stderr.splitlines() if l.startswith("python3 -m sonde:")]
    assert len(said) == 1 and "cannot load sonde's extension" in said[0], r.stderr
    # The program's own `import sonde` under a preloaded libsonde: regions are no-ops.
    plain = subprocess.run([PY, "one.py"], env=clean_env(
        PYTHONPATH=tmp_path / "pkg", LD_PRELOAD=os.path.join(BUILD, "lib", "libsonde.so"),
        SONDE_OUTPUT=tmp_path / "q.db"), cwd=tmp_path, capture_output=True, text=True,
        timeout=120)
    assert (plain.returncode, plain.stdout) == (0, "1\n"), plain.stderr
