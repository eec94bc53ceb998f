"""One truth per figure: every percentage a command prints is at most 100 % of the denominator
it names, also where threads run side by side (a sum over threads against one wall time
passes 100 %)."""
import json
import subprocess

from conftest import CLI, clean_env, plain, prog, profile_whole, same_behaviour, sonde_run


def sonde_json(*args):
    r = subprocess.run([CLI, *map(str, args), "--format", "json"], capture_output=True,
                       text=True, timeout=60, env=clean_env())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def walk(node, out):
    out.append(node)
    for child in node.get("children", []):
        walk(child, out)
    return out


def test_shares_of_threads_side_by_side(db):
    """two threads in one region for the whole run: report, tree and metrics phases <= 100 %"""
    cmd = [prog("busy_threads"), 2]
    same_behaviour(plain(cmd, env_extra={"OPENBLAS_NUM_THREADS": "1"}),
                   sonde_run(cmd, db, env_extra={"OPENBLAS_NUM_THREADS": "1"}))
    profile_whole(db)
    report = sonde_json("report", db, "--top", "0")
    assert report["busy_threads"] == 2, report["run"]
    shares = {"report": max(r["pct_time"] for r in report["rows"])}
    for mode in ("each", "merge"):
        tree = sonde_json("tree", db, "--threads", mode, "--min-pct", "0")
        roots = [t["tree"] for t in tree["trees"]] if "trees" in tree else [tree["tree"]]
        shares[f"tree {mode}"] = max(n["incl_pct"] for r in roots for n in walk(r, []))
    # The phase's share, whatever it is called (it was pct_run, of the wall time: 148.5 %).
    phases = {p["phase"]: p.get("pct_total", p.get("pct_run"))
              for p in sonde_json("metrics", db, "--section", "phases")["phases"]}
    shares["metrics phases"] = max(phases.values())
    assert all(v <= 100.0 + 1e-9 for v in shares.values()), shares
    # The region ran on both threads for nearly all of their time.
    assert phases["work"] >= 80.0, phases
