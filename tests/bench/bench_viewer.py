#!/usr/bin/env python3
"""Viewer target of DESIGN.md: a profile of 1M call-path rows opens and draws its first panel in
< 2 s in headless chromium. Makes the synthetic profile run_benchmarks.py's report benchmark uses,
then, in the same run: `sonde report` on it (3 times), and `sonde view` on it (3 times, each a new
process, tests/viewer/bench_view.mjs): from starting `sonde view` to its first panel drawn in an
open chromium, and to every panel. Prints the medians and their ratio to `sonde report` (the 2 s
target was set where `sonde report` took 1.2 s: x1.7). Then `sonde view-bundle` (what --html
computes, every part) and, unless --no-html, that bundle opened inline (tests/viewer/bench_open.mjs).
A measurement, not a test: it fails only when something does not work.

    tests/bench/bench_viewer.py --build-dir build [--nodes 1000000] [--work-dir DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from types import SimpleNamespace

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from run_benchmarks import make_big_profile  # noqa: E402  (the same synthetic file)


def timed(cmd, **kw):
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, **kw)
    if r.returncode != 0:
        sys.exit(f"bench_viewer: {cmd[0]} failed: {r.stderr.decode(errors='replace')[-2000:]}")
    return time.perf_counter() - t, r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--work-dir", default=None)
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--routines", type=int, default=5_000)
    ap.add_argument("--no-html", action="store_true",
                    help="leave out view-bundle and the inline bundle in the browser")
    ap.add_argument("--reuse", action="store_true",
                    help="open the bundle of the last run again (only the browser part)")
    a = ap.parse_args()
    build = os.path.abspath(a.build_dir)
    work = a.work_dir or os.path.join(build, "tests", "bench", "viewer")
    os.makedirs(work, exist_ok=True)
    cli = os.path.join(build, "bin", "sonde")
    if not os.path.exists(cli):
        cli = os.path.join(build, "analyzers", "sonde")
    db = os.path.join(work, "big.db")
    bundle = os.path.join(work, "big.json")
    if a.reuse and os.path.exists(bundle):
        return open_in_browser(build, bundle)
    t = time.perf_counter()
    make_big_profile(SimpleNamespace(source=SOURCE), db, a.nodes, a.routines)
    print(f"synthetic profile: {a.nodes:,} call-path rows, {a.routines:,} routines "
          f"({time.perf_counter() - t:.1f} s, {os.path.getsize(db) / 2**20:.0f} MiB)")
    reports = [timed([cli, "report", db])[0] for _ in range(3)]
    report_s = statistics.median(reports)
    env = dict(os.environ, SONDE_SOURCE=SOURCE)
    _, out = timed(["node", os.path.join(SOURCE, "tests", "viewer", "bench_view.mjs"), cli, db, "3"],
                   env=env)
    r = json.loads(out)
    if r["errors"]:
        sys.exit(f"bench_viewer: page errors: {r['errors']}")
    first = statistics.median(r["first_panel_s"])
    every = statistics.median(r["all_panels_s"])
    print(f"sonde report: {', '.join(f'{x:.2f}' for x in reports)} s; median {report_s:.2f} s")
    print(f"sonde view start to first panel ({r['frames']:,} frames drawn in the panel's rows): "
          f"{', '.join(f'{x:.2f}' for x in r['first_panel_s'])} s; median {first:.2f} s "
          f"= x{first / report_s:.2f} sonde report (target < 2 s where report takes 1.2 s: x1.67, "
          f"{'met' if first / report_s < 2 / 1.2 else 'NOT met'}; absolute {first:.2f} s vs 2 s: "
          f"{'met' if first < 2 else 'NOT met'}); URL printed after "
          f"{statistics.median(r['url_s']):.2f} s; every panel {every:.2f} s (x{every / report_s:.1f})")
    if a.no_html:
        return
    bundle_s, out = timed([cli, "view-bundle", db])
    with open(bundle, "wb") as f:
        f.write(out)
    print(f"sonde view-bundle (every part, as --html): {bundle_s:.2f} s, "
          f"{len(out) / 2**20:.1f} MiB of JSON (x{bundle_s / report_s:.1f} sonde report)")
    open_in_browser(build, bundle)


def open_in_browser(build, bundle):
    env = dict(os.environ, SONDE_SOURCE=SOURCE,
               SONDE_VIEWER_DIST=os.path.join(build, "viewer", "dist"))
    _, out = timed(["node", os.path.join(SOURCE, "tests", "viewer", "bench_open.mjs"), bundle, "3"],
                   env=env)
    r = json.loads(out)
    if r["errors"]:
        sys.exit(f"bench_viewer: page errors: {r['errors']}")
    med = statistics.median(r["first_panel_ms"]) / 1000
    blank = statistics.median(r["blank_ms"]) / 1000
    every = statistics.median(r["all_panels_ms"]) / 1000
    print(f"the whole bundle inline: first panel drawn (navigation to flame graph, {r['frames']:,} frames drawn in the panel's rows): "
          f"{', '.join(f'{x / 1000:.2f}' for x in r['first_panel_ms'])} s; median {med:.2f} s "
          f"= {med / 2:.2f} of the 2 s target ({'met' if med < 2 else 'NOT met'}); "
          f"every panel built {every:.2f} s; a blank page in the same browser {blank:.2f} s")
    return med


if __name__ == "__main__":
    main()
