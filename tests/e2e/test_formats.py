"""--format csv for the commands that print a table (tree, candidates, diff; calibrate's is in
test_calibrate.py): each reads back with Python's csv module and says what the JSON says."""
import csv
import io
import json
import os
import subprocess

import pytest

from conftest import CLI, MLP, clean_env, run, sonde_json, sonde_out

BUILD = os.environ.get("SONDE_BUILD", "")


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("formats")
    for name, batch in (("a.db", 100), ("b.db", 200)):
        r = run([MLP, "--steps", 10, "--batch", batch, "--eval-every", 0], d / name)
        assert r.returncode == 0, r.stderr
    return d / "a.db", d / "b.db"


def rows(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_tree_csv_rows_are_the_json_nodes(profiles):
    a, _ = profiles
    table = rows(sonde_out("tree", a, "--format", "csv", "--min-pct", 0))
    tree = sonde_json("tree", a, "--min-pct", 0)["trees"][0]["tree"]

    def walk(node, path, depth):
        yield path, node["name"], node["calls"], depth
        for c in node["children"]:
            yield from walk(c, f"{path};{c['name']}" if path else c["name"], depth + 1)

    assert [(r["path"], r["name"], int(r["calls"]), int(r["depth"])) for r in table] == \
        list(walk(tree, "", 0))
    assert any(r["path"] == "step;forward;cblas_sgemm" for r in table)


def test_candidates_and_diff_csv_say_what_the_json_says(profiles):
    a, b = profiles
    table = rows(sonde_out("candidates", a, "-f", "csv"))
    found = json.loads(sonde_out("candidates", a, "-f", "json"))["candidates"]
    assert [(r["rule"], r["location"], float(r["est_gain_s"]), json.loads(r["evidence"]))
            for r in table] == [(c["rule"], c["location"], c["est_gain_s"], c["evidence"])
                                for c in found]
    assert [int(r["rank"]) for r in table] == list(range(1, len(found) + 1))
    diff = rows(sonde_out("diff", a, b, "-f", "csv"))
    d = json.loads(sonde_out("diff", a, b, "-f", "json"))
    for section, key in (("phase", "phases"), ("routine", "routines")):
        mine = [(r["name"], float(r["before_s"])) for r in diff if r["section"] == section]
        assert mine == [(x["name"], x["before_s"]) for x in d[key]]
    assert any(r["section"] == "routine" and r["name"] == "cblas_sgemm" for r in diff)


def test_diff_matches_one_script_in_two_checkouts(tmp_path):
    """A Python function's file is its absolute path: two checkouts of one script matched nothing
    (every function 'only before' and 'only after'). A function on one side only is paired with
    the one on the other side only that has the same file base name, line and name."""
    body = ("def f(n):\n    return sum(i * i for i in range(n))\n"
            "def g():\n    return 1\n"
            "for _ in range(20): f(2000)\n")
    dbs = []
    for d in ("A", "B"):
        (tmp_path / d).mkdir()
        script = tmp_path / d / "s.py"
        script.write_text(body + ("g()\n" if d == "A" else ""))
        db = tmp_path / f"{d}.db"
        r = subprocess.run(["/usr/bin/python3", "-m", "sonde", "-o", str(db), str(script)],
                           env=clean_env(PYTHONPATH=os.path.join(BUILD, "python")),
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        dbs.append(db)
    d = json.loads(sonde_out("diff", *dbs, "-f", "json"))
    status = {p["name"]: p["status"] for p in d["phases"]}
    assert status["s.py:1(f)"] == "both" and status["s.py:1(<module>)"] == "both", status
    assert status["s.py:3(g)"] == "only before", status  # called in A's script alone


def test_every_json_output_has_the_common_envelope(profiles, tmp_path):
    """One reader serves every --format json: an object whose first keys are format_version,
    subcommand and (for one profile) file; a list is under a key (rows, candidates), where query,
    shapes and candidates printed a bare list."""
    a, b = profiles[:2]
    one = {"report": [], "tree": [], "shapes": [], "metrics": [], "candidates": [],
           "ranks": [], "query": ["SELECT 1 AS one"], "tree --callers": ["--callers", "step"]}
    for name, extra in one.items():
        command = name.split()[0]
        doc = sonde_json(command, a, *extra)
        assert list(doc)[:3] == ["format_version", "subcommand", "file"], (name, list(doc))
        assert (doc["format_version"], doc["subcommand"], doc["file"]) == (1, command, str(a)), name
    assert sonde_json("query", a, "SELECT 1 AS one")["rows"] == [{"one": 1}]
    assert isinstance(sonde_json("candidates", a)["candidates"], list)
    for command, args in (("diff", [a, b]), ("scaling", [a, b])):
        doc = sonde_json(command, *args)
        assert list(doc)[:2] == ["format_version", "subcommand"] and doc["subcommand"] == command
    # calibrate's too (it had peaks_file and peaks alone: a red-team reading of "every").
    peaks = clean_env(SONDE_PEAKS=str(tmp_path / "t.peaks"))
    for args in (["--set", "gemm.f32=100"], ["--show", "-f", "json"]):
        r = subprocess.run([CLI, "calibrate", *args], capture_output=True, text=True, env=peaks,
                           timeout=60)
        assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc)[:3] == ["format_version", "subcommand", "peaks_file"], doc
    assert (doc["format_version"], doc["subcommand"]) == (1, "calibrate"), doc
