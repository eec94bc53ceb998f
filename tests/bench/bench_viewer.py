#!/usr/bin/env python3
"""Viewer target of DESIGN.md: a profile of 1M call-path rows opens and draws its first panel in
< 2 s in headless chromium. Makes the synthetic profile run_benchmarks.py's report benchmark uses,
builds its bundle with `sonde view-bundle` (timed, beside `sonde report`, `sonde metrics` and
`sonde candidates` on the same file), then opens the viewer on it (tests/viewer/bench_open.mjs)
and prints the time to the first panel with the ratio to the target, and what a user of
`sonde view` waits in all: the bundle built, then the first panel drawn. A measurement, not a
test: it fails only when something does not work.

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
    report_s, _ = timed([cli, "report", db])
    metrics_s, _ = timed([cli, "metrics", "--format", "json", db])
    candidates_s, _ = timed([cli, "candidates", "--format", "json", db])
    bundle_s, out = timed([cli, "view-bundle", db])
    with open(bundle, "wb") as f:
        f.write(out)
    print(f"sonde view-bundle: {bundle_s:.2f} s, {len(out) / 2**20:.1f} MiB of JSON "
          f"(sonde report on the same file: {report_s:.2f} s, x{bundle_s / report_s:.1f}); "
          f"sonde metrics {metrics_s:.2f} s (x{metrics_s / report_s:.1f}), "
          f"sonde candidates {candidates_s:.2f} s (x{candidates_s / report_s:.1f})")
    first = open_in_browser(build, bundle)
    print(f"sonde view start to first panel: {bundle_s:.2f} s bundle + {first:.2f} s first panel "
          f"= {bundle_s + first:.2f} s (x{(bundle_s + first) / report_s:.1f} sonde report)")


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
    print(f"first panel drawn (navigation to flame graph, {r['frames']:,} frames drawn): "
          f"{', '.join(f'{x / 1000:.2f}' for x in r['first_panel_ms'])} s; median {med:.2f} s "
          f"= {med / 2:.2f} of the 2 s target ({'met' if med < 2 else 'NOT met'}); "
          f"every panel built {every:.2f} s; a blank page in the same browser {blank:.2f} s")
    return med


if __name__ == "__main__":
    main()
