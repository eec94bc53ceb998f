"""Issue 11's "no report row exceeds 100 % of its denominator", on the real workloads: the C++
mlp_train, examples/mlp_numpy/train.py and examples/torch_cnn/train.py, each profiled once, then
every command that prints a share (report, tree each and merged, metrics phases and breakdown,
ranks) read in JSON: every share at most 100 %, and each command's figure equal to the one
place it is defined (the hotspots view, the thread's time, run_totals)."""
import os
import re
import sqlite3
import subprocess

import pytest

from conftest import CLI, MLP, clean_env, sonde_json

PY = "/usr/bin/python3"
BUILD = os.environ.get("SONDE_BUILD", "")
SOURCE = os.environ.get("SONDE_SOURCE", "")
EPS = 1e-9


def view(db, sql):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


@pytest.fixture(scope="module", params=["mlp_train", "mlp_numpy", "torch_cnn"])
def profile(request, tmp_path_factory):
    db = tmp_path_factory.mktemp("workloads") / f"{request.param}.db"
    if request.param == "mlp_train":
        cmd = [CLI, "run", "-o", str(db), "--", MLP, "--steps", "30"]
    else:
        script = {"mlp_numpy": ("mlp_numpy", "--steps", "20", "--hidden", "128"),
                  "torch_cnn": ("torch_cnn", "--steps", "6", "--eval-every", "3")}[request.param]
        cmd = [PY, "-m", "sonde", "-o", str(db),
               os.path.join(SOURCE, "examples", script[0], "train.py"), *script[1:]]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=db.parent,
                       env=clean_env(PYTHONPATH=os.path.join(BUILD, "python")))
    assert r.returncode == 0, r.stderr
    return db


def walk(node, out):
    out.append(node)
    for child in node.get("children", []):
        walk(child, out)
    return out


def test_no_row_passes_its_denominator(profile):
    db = profile
    shares = {}
    report = sonde_json("report", db, "--top", "0")
    shares["report %Time"] = [row["pct_time"] for row in report["rows"]]
    # The report's rows are the hotspots view's, figure for figure.
    hot = {rid: pct for rid, pct in view(db, "SELECT routine_id, incl_pct FROM hotspots")}
    for row in report["rows"]:
        assert row["pct_time"] == pytest.approx(hot[row["routine_id"]], abs=1e-9), row
    tree = sonde_json("tree", db, "--threads", "each", "--min-pct", "0")
    shares["tree each"] = [n["incl_pct"] for t in tree["trees"] for n in walk(t["tree"], [])]
    merged = sonde_json("tree", db, "--threads", "merge", "--min-pct", "0")
    shares["tree merge"] = [n["incl_pct"] for n in walk(merged["tree"], [])]
    metrics = sonde_json("metrics", db)
    shares["metrics phases"] = [p["pct_total"] for p in metrics["phases"]]
    b = metrics["breakdown"]
    assert b["found"], b["reason"]
    shares["breakdown % thread"] = [p["pct_thread"] for p in b["phases"]]
    assert sum(shares["breakdown % thread"]) == pytest.approx(100.0, abs=1e-3)
    ranks = sonde_json("ranks", db)
    shares["ranks comm %"] = [r["comm_pct"] for r in ranks["per_rank"]]
    for r in ranks["per_rank"]:
        assert r["busy_s"] <= r["wall_s"] + 1e-6, r
    over = {k: max(v) for k, v in shares.items() if v and max(v) > 100.0 + EPS}
    assert not over, over
    assert all(v for k, v in shares.items() if k != "ranks comm %"), shares


def test_totals_come_from_run_totals(profile):
    """The report's wall and busy totals are run_totals' (one definition), and the busy
    threads' time is at most the wall time times the busy threads."""
    report = sonde_json("report", profile, "--top", "1")
    ((wall, thread_s, busy),) = view(profile, "SELECT wall_s, thread_s, busy_threads FROM run_totals")
    assert report["wall_s"] == pytest.approx(wall, rel=1e-9)
    assert report["total_s"] == pytest.approx(thread_s, rel=1e-9)
    assert thread_s <= wall * busy + 1e-6


def test_version_names_the_schema_version():
    header = open(os.path.join(SOURCE, "libprof", "src", "store",
                               "schema_version.hpp")).read()
    version = re.search(r"kSchemaVersion = (\d+);", header).group(1)
    r = subprocess.run([CLI, "--version"], capture_output=True, text=True, env=clean_env())
    assert r.returncode == 0
    assert r.stdout.strip().endswith(f"(reads profile schema up to version {version})"), r.stdout


def test_metrics_flops_come_from_routine_totals(profile):
    """sonde metrics' roofline reads a routine's own FLOPs from routine_totals (schema 4): its
    GFLOP/s is those FLOPs over the routine's inclusive time in hotspots."""
    flops = dict(view(profile, "SELECT routine_id, flops FROM routine_totals"))
    incl = dict(view(profile, "SELECT routine_id, incl_s FROM hotspots"))
    metrics = sonde_json("metrics", profile, "--top", "0")
    assert metrics["roofline"], "no routine with FLOPs"
    for row in metrics["roofline"]:
        rid = row["routine_id"]
        assert row["gflops"] == pytest.approx(flops[rid] / incl[rid] / 1e9, rel=1e-6), row


NODE_SUMS = """
    SELECT thread_id, routine_id, parent_id IS NULL, SUM(calls), SUM(subrs),
           SUM(CASE WHEN recursive = 0 THEN incl_ns ELSE 0 END), SUM(excl_ns),
           ROUND(SUM(flops)), ROUND(SUM(bytes))
    FROM nodes GROUP BY thread_id, routine_id, parent_id IS NULL"""


def test_the_writers_routine_sums_are_its_nodes_summed(profile):
    """thread_routine_sums (schema 8), which hotspots, routine_totals and rank_hotspots read, is
    the writer's copy of its nodes summed per thread and routine, the root apart: on each real
    workload, row for row what thread_routine_totals defines from the nodes."""
    kept = view(profile, "SELECT thread_id, routine_id, root, calls, subrs, incl_ns, excl_ns, "
                         "ROUND(flops), ROUND(bytes) FROM thread_routine_sums")
    summed = view(profile, NODE_SUMS)
    assert kept and sorted(kept) == sorted(summed)
