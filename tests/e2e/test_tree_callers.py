"""`sonde tree --callers ROUTINE` (and --callees) on a real Python program: a helper called from
three functions a different number of times, one of them recursive, and two routines of one
name in two modules. Every figure is held against SQL on the nodes table, read with Python's
own sqlite3 module."""
import csv
import io
import json
import subprocess

import pytest

from conftest import clean_env, query, sonde
from test_python import PYTHONPATH, PY

PROGRAM = """\
import sonde, time
from one import model as m1
from two import model as m2

def spin(s):
    end = time.perf_counter() + s
    while time.perf_counter() < end:
        pass

def helper(ms):
    spin(ms / 1000)

def alpha():
    for _ in range(3):
        helper(2)

def beta():
    for _ in range(5):
        helper(20)

def rec(n):
    helper(2)
    return rec(n - 1) if n else 0

def leaf():
    pass

def ping(n):
    return pong(n) if n else leaf()

def pong(n):
    return ping(n - 1)

def main():
    alpha()
    beta()
    rec(3)
    ping(2)
    m1.step()
    with sonde.region("step"):
        m2.step()

main()
"""
MODEL = "def step():\n    pass\n"


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    folder = tmp_path_factory.mktemp("callers")
    (folder / "prog.py").write_text(PROGRAM)
    for sub in ("one", "two"):
        (folder / sub).mkdir()
        (folder / sub / "__init__.py").write_text("")
        (folder / sub / "model.py").write_text(MODEL)
    db = folder / "prof.db"
    r = subprocess.run([PY, "-m", "sonde", "-o", str(db), "prog.py"], cwd=folder,
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return db


def callers(db, routine, *args, side="--callers"):
    fold = [] if "--min-pct" in args else ["--min-pct", "0"]
    r = sonde("tree", db, side, routine, *fold, "--format", "json", *args)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    # The CLI's envelope (docs/cli.md, JSON output) around what the viewer's part holds.
    assert (doc.pop("format_version"), doc.pop("subcommand"), doc.pop("file")) == (1, "tree", str(db))
    return doc


def ns(seconds):
    return round(seconds * 1e9)


def short(name):
    """A Python frame's function name: sonde names it as pstats does, "prog.py:10(helper)"."""
    return name[name.rfind("(") + 1:-1] if name.endswith(")") else name


def routine_id(db, name):
    (rid,), = query(db, "SELECT routine_id FROM routines WHERE name LIKE 'prog.py:%(' || ? || ')'",
                    (name,))
    return rid


def by_caller(db, name, levels):
    """SQL on the nodes table: the routine's nodes grouped by the routines `levels` frames above
    them (a tuple of names, nearest first): calls, incl_ns of non-recursive nodes, excl_ns."""
    joins, names = "", []
    prev = "c"
    for i in range(levels):
        joins += (f" JOIN nodes p{i} ON p{i}.node_id = {prev}.parent_id"
                  f" JOIN routines r{i} ON r{i}.routine_id = p{i}.routine_id")
        names.append(f"r{i}.name")
        prev = f"p{i}"
    rows = query(db, f"SELECT {', '.join(names)}, SUM(c.calls), "
                     f"SUM(CASE WHEN c.recursive = 0 THEN c.incl_ns ELSE 0 END), SUM(c.excl_ns) "
                     f"FROM nodes c{joins} WHERE c.routine_id = ? GROUP BY {', '.join(names)}",
                 (routine_id(db, name),))
    return {tuple(map(short, r[:levels])): tuple(r[levels:]) for r in rows}


def figures(node):
    return node["calls"], ns(node["incl_s"]), ns(node["excl_s"])


def test_callers_equal_sql_on_nodes(profile):
    """helper's callers: alpha 3 calls, beta 5, rec 4 (over its recursion), each with the calls
    and times SQL sums over helper's nodes under that caller; the root is helper's hotspots row
    and the children sum to it."""
    out = callers(profile, "helper")
    root = out["callers"]
    (calls, incl, excl), = query(
        profile, "SELECT SUM(calls), SUM(CASE WHEN recursive = 0 THEN incl_ns END), "
                 "SUM(excl_ns) FROM nodes WHERE routine_id = ?", (routine_id(profile, "helper"),))
    assert figures(root) == (calls, incl, excl) == (12, incl, excl)
    (hot,), = [query(profile, "SELECT calls, incl_s, excl_s FROM hotspots WHERE routine_id = ?",
                     (routine_id(profile, "helper"),))]
    assert (root["calls"], ns(root["incl_s"]), ns(root["excl_s"])) == (
        hot[0], ns(hot[1]), ns(hot[2]))
    assert out["routine"]["name"] == "prog.py:10(helper)" and out["denominator"]
    sql = by_caller(profile, "helper", 1)
    got = {(short(c["name"]),): figures(c) for c in root["children"]}
    assert got == sql
    assert {k[0]: v[0] for k, v in got.items()} == {"alpha": 3, "beta": 5, "rec": 4}
    assert sum(v[1] for v in got.values()) == incl and sum(v[2] for v in got.values()) == excl
    # Sorted by time as SQL measured it (beta's 5 x 20 ms, rec's 4 x 2 ms, alpha's 3 x 2 ms
    # spinning: rec and alpha swap places when a loaded machine stretches alpha's by 2 ms).
    order = sorted(got, key=lambda k: -sql[k][1])
    assert [short(c["name"]) for c in root["children"]] == [k[0] for k in order]
    assert root["children"][0]["incl_pct"] == pytest.approx(100 * sql[order[0]][1] / incl)


def test_caller_chains_go_up_to_the_thread_root(profile):
    """Beneath a caller, its callers: helper <- alpha <- main, equal to SQL grouping helper's
    nodes by their grandparents; recursion among the callers is folded (helper <- rec <- rec
    <- main is helper <- rec <- main), so rec's one caller is main, with all 4 calls."""
    root = callers(profile, "helper")["callers"]
    two = by_caller(profile, "helper", 2)
    for caller in root["children"]:
        name = short(caller["name"])
        got = {(name, short(g["name"])): figures(g) for g in caller["children"]}
        if name != "rec":
            assert got == {k: v for k, v in two.items() if k[0] == name}
        else:
            assert got == {("rec", "main"): by_caller(profile, "helper", 1)[("rec",)]}
    assert ("rec", "rec") in two  # the nodes do have rec under rec
    # Every chain ends at the thread's root.
    node, names = root, []
    while node["children"]:
        node = next(c for c in node["children"] if short(c["name"]) == "alpha" or names)
        names.append(short(node["name"]))
    assert names == ["alpha", "main", "<module>", "<thread>"]


def test_recursion_counts_with_the_outermost_call(profile):
    """rec's callers: main alone, with all 4 calls and the exclusive time of every rec node, the
    inclusive time of the outermost call once (hotspots' figures)."""
    root = callers(profile, "rec")["callers"]
    (calls, incl, excl), = query(
        profile, "SELECT SUM(calls), SUM(CASE WHEN recursive = 0 THEN incl_ns END), "
                 "SUM(excl_ns) FROM nodes WHERE routine_id = ?", (routine_id(profile, "rec"),))
    assert calls == 4
    assert [short(c["name"]) for c in root["children"]] == ["main"]
    assert figures(root) == figures(root["children"][0]) == (calls, incl, excl)


def test_callees_equal_sql_on_nodes(profile):
    """beta's callees: helper, 5 calls, its figures those of helper's nodes under beta."""
    root = callers(profile, "beta", side="--callees")["callees"]
    assert [short(c["name"]) for c in root["children"]] == ["helper"]
    assert (figures(root["children"][0]) == by_caller(profile, "helper", 1)[("beta",)]
            and root["children"][0]["calls"] == 5)


def test_text_csv_and_depth(profile):
    r = sonde("tree", profile, "--callers", "helper", "--min-pct", "0")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("callers of prog.py:10(helper) [python] ") and "12 calls" in lines[0]
    assert lines[1].split() == ["incl", "%", "incl", "s", "excl", "s", "calls", "name"]
    assert lines[2].split()[3:] == ["12", "prog.py:10(helper)", "[python]"]
    # beta first: 100 ms against rec's 8 and alpha's 6 (at 5 x 4 ms, a clean-clone ctest under
    # load once read alpha's or rec's above it).
    assert lines[3].split()[3:] == ["5", "├─", "prog.py:17(beta)", "[python]"]
    rows = list(csv.DictReader(io.StringIO(
        sonde("tree", profile, "--callers", "helper", "--min-pct", "0", "-f", "csv").stdout)))
    paths = {";".join(map(short, r["path"].split(";"))) for r in rows}
    assert short(rows[0]["path"]) == "helper" and rows[1]["path"].endswith("(beta)")
    assert paths >= {"helper;rec;main;<module>;<thread>", "helper;alpha;main;<module>"}
    shallow = callers(profile, "helper", "--depth", "1")["callers"]
    assert all(c["children"] == [] for c in shallow["children"])
    # --min-pct folds the callers below it (of helper's time): the least of the three (alpha's
    # ~6 of ~114 ms spinning, or rec's where a loaded machine stretches alpha's), cut halfway
    # between its share and the next one's as SQL measured them.
    sql = by_caller(profile, "helper", 1)
    total = sum(v[1] for v in sql.values())
    (least, least_ns), (_, next_ns) = sorted(((k[0], v[1]) for k, v in sql.items()),
                                             key=lambda kv: kv[1])[:2]
    cut = 100 * (least_ns + next_ns) / 2 / total
    folded = callers(profile, "helper", "--min-pct", f"{cut:.4f}")["callers"]
    assert least not in [short(c["name"]) for c in folded["children"]]
    assert folded["folded"]["calls"] == sql[(least,)][0]


def test_names_unknown_ambiguous_and_qualified(profile):
    r = sonde("tree", profile, "--callers", "helpr")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == "sonde tree: no routine named 'helpr' was called; did you mean 'helper'?"
    r = sonde("tree", profile, "--callers", "elp")
    assert r.returncode == 2 and "names containing it: 'helper'" in r.stderr
    r = sonde("tree", profile, "--callers", "step")
    assert r.returncode == 2 and "3 routines are named 'step'" in r.stderr
    assert "one/model.py:1" in r.stderr and "two/model.py:1" in r.stderr
    assert "'step@region'" in r.stderr  # a region of the name, as a training loop's step is
    out = callers(profile, "step@one/model.py:1")
    assert out["routine"]["where"].endswith("one/model.py:1")
    assert [short(c["name"]) for c in out["callers"]["children"]] == ["main"]
    out = callers(profile, "step@region")
    assert out["routine"]["kind"] == "region"
    assert [short(c["name"]) for c in out["callers"]["children"]] == ["main"]
    down = callers(profile, "step@region", side="--callees")["callees"]
    assert [short(c["name"]) for c in down["children"]] == ["step"]
    r = sonde("tree", profile, "--callers", "helper", "--threads", "merge")
    assert r.returncode == 2 and "--threads does not apply" in r.stderr
    r = sonde("tree", profile, "--callers", "helper", "--callees", "helper")
    assert r.returncode == 2


def test_viewer_part_is_the_cli_figures(profile):
    """`sonde view`'s sandwich_<id> part holds what `sonde tree --callers` and `--callees` print
    (the same function, at the panel's 0.5 %); an id no busy thread called, or a thread's root,
    is 404; the --html document carries the hot spots' first routines."""
    from test_view import get, serving
    rid = routine_id(profile, "helper")
    (root_id,), = query(profile, "SELECT routine_id FROM routines WHERE kind = 'root'")
    with serving(profile) as (_, _, port, token):
        status, _, body = get(port, f"/data.json?token={token}&profile=0&part=sandwich_{rid}")
        assert status == 200
        part = json.loads(body)
        for bad in (root_id, 999999, "x1"):
            assert get(port, f"/data.json?token={token}&profile=0&part=sandwich_{bad}")[0] == 404
        whole = json.loads(get(port, f"/data.json?token={token}")[2])["profiles"][0]
    up = callers(profile, "helper", "--min-pct", "0.5")
    down = callers(profile, "helper", "--min-pct", "0.5", side="--callees")
    assert part["callers"] == up["callers"] and part["callees"] == down["callees"]
    assert part["routine"] == up["routine"] and part["min_pct"] == 0.5
    assert whole[f"sandwich_{rid}"] == part
    hot = [r for r, k in query(profile, "SELECT routine_id, kind FROM hotspots "
                                        "ORDER BY excl_s DESC, incl_s DESC") if k != "root"]
    carried = {int(k.split("_")[1]) for k in whole if k.startswith("sandwich_")}
    assert carried == set(hot[:50])


def test_mutual_recursion_is_folded(profile):
    """ping -> pong -> ping -> pong -> ping -> leaf: leaf's chain shows each routine once (leaf
    <- ping <- pong <- main), and ping's inner calls count with its outermost, called by main."""
    root = callers(profile, "leaf")["callers"]
    node, names = root, []
    while node["children"]:
        (node,) = node["children"]
        names.append(short(node["name"]))
    assert names == ["ping", "pong", "main", "<module>", "<thread>"]
    (calls, excl), = query(profile, "SELECT SUM(calls), SUM(excl_ns) FROM nodes "
                                    "WHERE routine_id = ?", (routine_id(profile, "ping"),))
    ping = callers(profile, "ping")["callers"]
    assert calls == 3 and [short(c["name"]) for c in ping["children"]] == ["main"]
    assert (ping["children"][0]["calls"], ns(ping["children"][0]["excl_s"])) == (calls, excl)
