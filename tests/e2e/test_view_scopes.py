"""`sonde view`'s trees per process and per rank, served part by part: `tree_scopes` lists them
and each part is the tree `sonde tree --threads merge --min-pct 0.01 --format json` prints for
that process (--pid P) or rank (--rank R), so the viewer reads the same functions as `sonde
tree`. A fork-and-exec program (process_tree) for processes, known_time run as two ranks and
merged for ranks."""
import json

import pytest

from conftest import BIN, query, run
from test_ranks import merge, rank_files, sonde
from test_view import get, serving


def tree(db, *args):
    p = sonde("tree", db, "--threads", "merge", "--min-pct", "0.01", "--format", "json", *args)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    # The CLI's envelope (docs/cli.md, JSON output) around what the viewer's part holds.
    assert (doc.pop("format_version"), doc.pop("subcommand"), doc.pop("file")) == (1, "tree", str(db))
    # The sampled rows the CLI adds after the tree, as its text does; the viewer's scope parts
    # are the tree alone (the report part carries them).
    assert isinstance(doc.pop("sampled"), list)
    return doc


def parts(db):
    """The tree_scopes part and every part it names, as the served page gets them."""
    with serving(db) as (_, _, port, token):
        def part(name):
            status, _, body = get(port, f"/data.json?token={token}&profile=0&part={name}")
            assert status == 200, (name, status)
            return json.loads(body)
        scopes = part("tree_scopes")
        trees = {s["part"]: part(s["part"]) for s in scopes["scopes"]}
        assert get(port, f"/data.json?token={token}&profile=0&part=tree_process_999")[0] == 404
        whole = json.loads(get(port, f"/data.json?token={token}")[2])["profiles"][0]
    for name, t in trees.items():
        assert whole[name] == t, name  # --html carries the same trees
    return scopes, trees


def test_each_process_has_its_threads_merged(tmp_path):
    db = tmp_path / "tree.db"
    r = run([BIN / "process_tree"], db)
    assert r.returncode == 0, r.stderr
    scopes, trees = parts(db)
    procs = scopes["scopes"]
    assert scopes["ranks"] == 1 and all(s["kind"] == "process" for s in procs)
    # the parent (3 busy threads), fork children A and B, and C with the image it exec'd: one
    # process of one pid
    assert len(procs) == scopes["processes"] == 4, procs
    # Its 3 threads are in the part, each busy or waiting: a thread of 7 calls of 100 ns whose
    # life was mostly spent off the CPU (CI's ctest -j2) reads waiting (thread_times), so the
    # part's busy count was 2 once in CI.
    parent = procs[0]
    assert 1 <= parent["busy_threads"] <= 3, parent
    assert query(db, "SELECT SUM(pt.busy_threads + pt.waiting_threads) FROM process_times pt "
                     "JOIN processes p USING (process_id) WHERE p.pid = ?",
                 (parent["pid"],)) == [(3,)]
    assert [s["images"] for s in procs].count(2) == 1
    for s in procs:
        assert s["rank"] is None
        assert trees[s["part"]] == tree(db, "--pid", s["pid"]), s
        # its busy threads' time is its tree's 100 %
        assert trees[s["part"]]["tree"]["incl_s"] == pytest.approx(s["busy_s"], abs=1e-6)
    # cblas_sdot: 1 + 2 x 7 calls in the parent, 3, 2 and 5 in the children. Counted in each
    # process's whole tree: in the part, 0.01 % of a parent that waits for its children can
    # be more than its 15 calls of 100 ns (a loaded machine's ctest -j2 pruned them).
    def sdot_calls(pid):
        p = sonde("tree", db, "--threads", "merge", "--pid", pid, "--min-pct", "0",
                  "--format", "json")
        assert p.returncode == 0, p.stderr
        return sum(c["calls"] for c in json.loads(p.stdout)["tree"]["children"]
                   if c["name"] == "cblas_sdot")
    assert sorted(sdot_calls(s["pid"]) for s in procs) == [2, 3, 5, 15]


def test_each_rank_has_its_threads_merged(tmp_path):
    files = rank_files(tmp_path, [40, 160])
    db = tmp_path / "run.db"
    p = merge(db, files)
    assert p.returncode == 0, p.stderr
    scopes, trees = parts(db)
    ranks = [s for s in scopes["scopes"] if s["kind"] == "rank"]
    assert [s["rank"] for s in ranks] == [0, 1] and scopes["ranks"] == 2
    for s in ranks:
        assert trees[s["part"]] == tree(db, "--rank", s["rank"]), s
    assert trees["tree_rank_0"] != trees["tree_rank_1"]  # their sleeps differ
    # each rank is one process: the process entries point at the ranks' trees
    procs = [s for s in scopes["scopes"] if s["kind"] == "process"]
    assert [(s["rank"], s["part"]) for s in procs] == [(0, "tree_rank_0"), (1, "tree_rank_1")]
    for s in procs:
        assert tree(db, "--pid", s["pid"], "--rank", s["rank"]) == trees[s["part"]]


def test_tree_pid_refuses_what_the_file_does_not_hold(tmp_path):
    db = tmp_path / "tree.db"
    assert run([BIN / "process_tree"], db).returncode == 0
    p = sonde("tree", db, "--pid", 1)
    assert p.returncode == 2 and p.stdout == ""
    assert "holds no process 1 (pids " in p.stderr, p.stderr
