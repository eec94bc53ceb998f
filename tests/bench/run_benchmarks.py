#!/usr/bin/python3
"""Benchmarks of sonde's performance targets (docs/DESIGN "Performance targets").

Runs the programs of tests/bench with and without the preload, interleaved, and prints every
figure beside the comparison it is measured against in the same run (ratio or difference),
with the median, the minimum and the spread over repetitions: these machines are noisy.

  /usr/bin/python3 tests/bench/run_benchmarks.py            # full sizes (a few minutes)
  /usr/bin/python3 tests/bench/run_benchmarks.py --quick    # small sizes, < 60 s (CI)
  /usr/bin/python3 tests/bench/run_benchmarks.py --compare  # the guard: against the recorded
  /usr/bin/python3 tests/bench/run_benchmarks.py --compare --only call.added --strict
  /usr/bin/python3 tests/bench/run_benchmarks.py --record   # rewrites the recorded figures

--compare holds every figure of the run against the one docs/performance.md records (its table
of recorded figures, tests/bench/figures_table.py) and flags each that is worse by more than its
spread; --record writes this run's figures, date and commit into that table. Without --full,
both run the guard's set of benchmarks (GUARD) with fewer rounds than a full run: the same
sizes, so the figures mean the same, in a few minutes.

The timings never fail the run. It fails (exit 1) only when a benchmark program crashes or
produces no data, or when a profile does not hold exactly the calls the program made; with
--strict, also (exit 3) when --compare flags a figure as worse than recorded.

Paths come from the environment that ctest sets (SONDE_LIB, SONDE_CLI, SONDE_BUILD,
SONDE_SOURCE), else from --build-dir, else from the checkout this script lives in.
"""

import argparse
import datetime
import hashlib
import inspect
import json
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import figures_table  # noqa: E402  (beside this script)

# The figures the guard records (docs/performance.md) and compares: id -> (benchmark, unit,
# what it is). Each is a ratio or a difference taken within one round against a baseline
# measured in that round, never a raw timing; lower is better for every one.
FIGURES = {
    "call.added": ("call", "ns/call", "cblas_sdot(n=1): sonde - bare shim, paired per round"),
    "call.adaptive": ("call", "ns/call", "SONDE_ADAPTIVE=1 - 1 in 1024 timed: the amortised "
                                         "clock"),
    "memory.extra": ("memory", "MiB", "peak RSS with - without sonde, 10 M calls, 1,000 paths"),
    "flush.vs_sqlite": ("flush", "x sqlite3", "first flush of 100k flat paths / the same rows "
                                              "inserted by Python's sqlite3"),
    "report.vs_scan": ("report", "x scan", "sonde report on 1 M rows / a count-sum scan of "
                                           "nodes"),
    "report.forked": ("report", "x scan", "sonde report on 1 M rows of 200 forked workers "
                                          "with waiting threads / a count-sum scan of nodes"),
    "view.vs_scan": ("view", "x scan", "sonde view --html on 1 M rows / a count-sum scan of "
                                       "nodes"),
    "folded.vs_scan": ("view", "x scan", "sonde export --format folded on 1 M rows (to "
                                         "/dev/null) / a count-sum scan of nodes"),
    "tree_merge.vs_scan": ("view", "x scan", "sonde tree --threads merge on 1 M rows (text to a "
                                             "temporary file) / a count-sum scan of nodes"),
    "mlp.overhead": ("mlp", "%", "mlp_train --steps 300, wall time with / without - 1"),
    "mlp_numpy.overhead": ("mlp_numpy", "%", "mlp_numpy/train.py --steps 300 under python3 -m "
                                             "sonde / plain - 1"),
    "fixed.empty": ("fixed", "x plain", "python3 -m sonde on an empty script / plain python3"),
    "fixed.torch": ("fixed", "x plain", "python3 -m sonde on `import torch` / plain python3"),
    "fixed.fork": ("fixed", "x plain", "a fork child's page copies at its start, under a parent "
                                       "of 100k Python call paths, python3 -m sonde / plain"),
}
for _v in ("3.10", "3.11", "3.12", "3.13"):
    FIGURES[f"python{_v}.default"] = ("python", "x cProfile", "added time of py_callheavy.py "
                                      "under python3 -m sonde / under cProfile")
    FIGURES[f"python{_v}.builtins"] = ("python", "x cProfile", "the same with --builtins")
# What --compare and --record run unless --only or --full says otherwise: the benchmarks that
# resolve their figures in a few minutes together (mlp and mlp_numpy need minutes each).
GUARD = ("call", "memory", "flush", "report", "view", "python", "fixed")


def figure(cfg, fid, per_round):
    """Keeps the per-round values of figure `fid` for --compare and --record."""
    assert fid in FIGURES, fid
    cfg.figures[fid] = figures_table.Measured(per_round, FIGURES[fid][1])


class BenchError(Exception):
    """A benchmark did not work: a crash, no data, or a wrong count in the profile."""


# ----------------------------------------------------------------------------------------------
# Running programs


class Result:
    def __init__(self, values, wall_s, cpu_s, maxrss_kib, stdout, stderr):
        self.values = values  # key -> list of strings, from "key value" lines
        self.wall_s = wall_s
        self.cpu_s = cpu_s  # user + system time of the process, from wait4
        # From wait4: includes this Python's peak, which the child inherits across fork+exec.
        self.maxrss_kib = maxrss_kib
        self.stdout = stdout
        self.stderr = stderr

    def get(self, key, conv=float):
        if key not in self.values:
            raise BenchError(f"the program printed no '{key}' line:\n{self.stdout}{self.stderr}")
        return conv(self.values[key][-1])

    def all(self, key, conv=float):
        if key not in self.values:
            raise BenchError(f"the program printed no '{key}' line:\n{self.stdout}{self.stderr}")
        return [conv(v) for v in self.values[key]]


# --fifo: measured programs run under `chrt -f 1` (SCHED_FIFO; root), so that on a loaded machine
# other processes' time slices are not counted inside timed calls.
RUN_PREFIX = []


# A command's own peak RSS and wall time: a child forked from this Python starts from this
# Python's peak (Linux carries the memory it had before exec into ru_maxrss), which section 5's
# file-making leaves at 350 MiB. A fresh interpreter's few MB fork the command instead and
# report its figures into the file named first.
OWN_PEAK_LAUNCHER = """
import os, sys, time
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    finally:
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
with open(sys.argv[1], "w") as f:
    f.write(f"{usage.ru_maxrss} {time.perf_counter() - t0}")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run(cmd, env_extra=None, preload=None, output=None, capture=True, own_peak=False):
    """Runs cmd to completion; returns its "key value" lines, wall time and peak RSS (own_peak:
    the command's own, through OWN_PEAK_LAUNCHER; else its maximum with this Python's)."""
    if own_peak:
        with tempfile.NamedTemporaryFile("r", suffix=".peak") as figures:
            res = run([sys.executable, "-c", OWN_PEAK_LAUNCHER, figures.name, *cmd], env_extra,
                      preload, output, capture)
            maxrss, wall = figures.read().split()
        res.maxrss_kib, res.wall_s = int(maxrss), float(wall)
        return res
    cmd = RUN_PREFIX + list(cmd)
    env = dict(os.environ)
    for k in list(env):  # the benchmark decides what is preloaded and where profiles go
        if k.startswith("SONDE_") and k not in ("SONDE_LOG",):
            del env[k]
    env.pop("LD_PRELOAD", None)
    env.setdefault("SONDE_LOG", "warn")
    if preload:
        env["LD_PRELOAD"] = preload
    if output:
        if os.path.exists(output):
            os.unlink(output)
        env["SONDE_OUTPUT"] = output
    env.update(env_extra or {})
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out if capture else subprocess.DEVNULL, stderr=err,
                                env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} exited with status {proc.returncode} "
                         f"(LD_PRELOAD={preload or ''}):\n{stdout[-2000:]}{stderr[-2000:]}")
    values = {}
    for line in stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2:
            values.setdefault(parts[0], []).append(parts[1].strip())
    return Result(values, wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, stdout, stderr)


def profile_query(path, sql, params=()):
    if not os.path.exists(path):
        raise BenchError(f"no profile was written at {path}")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


def routine_calls(path, routine):
    """(number of nodes, total calls) of `routine` in the profile at `path`."""
    rows = profile_query(path, "SELECT COUNT(*), COALESCE(SUM(n.calls), 0) FROM nodes n "
                               "JOIN routines r USING (routine_id) WHERE r.name = ?", (routine,))
    return rows[0]


def expect(cond, message):
    if not cond:
        raise BenchError(message)


# ----------------------------------------------------------------------------------------------
# Statistics and printing


def spread(xs):
    return f"min {min(xs):.4g}, median {statistics.median(xs):.4g}, max {max(xs):.4g}, n={len(xs)}"


class Summary:
    def __init__(self):
        self.rows = []  # (benchmark, figure, comparison, target, verdict)

    def add(self, bench, figure, comparison, target, met):
        verdict = "" if met is None else "met" if met else "MISSED"  # None: no target
        self.rows.append((bench, figure, comparison, target, verdict))

    def print(self, quick):
        print("\n== Summary" + (" (quick mode: small sizes, not the targets' conditions; "
                                "verdicts are indicative only)" if quick else ""))
        head = ("benchmark", "measured", "comparison (same run)", "target", "")
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" for _ in head) + "|")
        for r in self.rows:
            print("| " + " | ".join(r) + " |")


def bare_scan_s(path):
    """The baseline of the readers' figures (report, view, folded): seconds to open the file
    and read every node once, `SELECT count(*), sum(excl_ns) FROM nodes` with the sqlite3 module."""
    t = time.perf_counter()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.execute("SELECT count(*), sum(excl_ns) FROM nodes").fetchall()
    db.close()
    return time.perf_counter() - t


def section(title):
    print(f"\n== {title}", flush=True)


# ----------------------------------------------------------------------------------------------
# 1. Added cost per intercepted call


def bench_call_cost(cfg, summary):
    section("1. Added cost per intercepted call (cblas_sdot, n = 1)")
    prog = [cfg.bench("bench_call_cost"), "--calls",
            str(cfg.size(10_000_000, 1_000_000, guard=3_000_000)), "--reps", "3"]
    # adaptive: SONDE_ADAPTIVE=1 (1 call in 16 timed once the path is sampled); untimed: 1 in
    # 1024, nearly no clock read, the floor the timing's amortised cost is measured from.
    variants = [("none", None, None), ("shim", cfg.shim, None), ("sonde", cfg.lib, None),
                ("adaptive", cfg.lib, {"SONDE_ADAPTIVE": "1"}),
                ("untimed", cfg.lib, {"SONDE_ADAPTIVE": "1024"})]
    per = {name: [] for name, _, _ in variants}
    tsc = []
    rounds = cfg.size(7, 2)
    db = os.path.join(cfg.work, "call_cost.db")
    for r in range(rounds):
        k = r % len(variants)
        order = variants[k:] + variants[:k]  # rotate which variant goes first
        for name, preload, extra in order:
            profiled = preload == cfg.lib
            res = run(prog, env_extra=extra, preload=preload, output=db if profiled else None)
            per[name].append(min(res.all("ns_per_call")))  # best of the in-process repetitions
            if "tsc_pair_ns" in res.values:
                tsc.append(res.get("tsc_pair_ns"))
            expect(res.get("sonde_active", int) == (1 if profiled else 0),
                   f"sonde_active is wrong for the '{name}' run")
            if profiled:
                nodes, calls = routine_calls(db, "cblas_sdot")
                made = res.get("calls_total", int)
                expect(calls == made, f"the profile counts {calls} cblas_sdot calls, the "
                                      f"program made {made}")
                expect(nodes == 1, f"cblas_sdot has {nodes} call paths, expected 1")
    for name, _, _ in variants:
        print(f"  {name:8s} ns/call: {spread(per[name])}")
    added = [s - b for s, b in zip(per["sonde"], per["shim"])]  # paired within a round
    shim_cost = [b - n for b, n in zip(per["shim"], per["none"])]
    print(f"  sonde - shim (paired per round), ns/call: {spread(added)}")
    print(f"  shim - none (interposition itself), ns/call: {spread(shim_cost)}")
    if tsc:
        print(f"  two back-to-back rdtsc reads, ns: {spread(tsc)}")
    med = statistics.median(added)
    cfg.added_ns = med
    figure(cfg, "call.added", added)
    summary.add("1. added cost per intercepted call",
                f"{med:.1f} ns/call (sonde − shim, median of {rounds} paired rounds; "
                f"range {min(added):.1f}–{max(added):.1f})",
                f"sonde {statistics.median(per['sonde']):.1f}, shim "
                f"{statistics.median(per['shim']):.1f}, no preload "
                f"{statistics.median(per['none']):.1f} ns/call"
                + (f"; 2×rdtsc {statistics.median(tsc):.1f} ns" if tsc else ""),
                "≤ 20 ns", med <= 20)
    timing = [a - u for a, u in zip(per["adaptive"], per["untimed"])]
    full_timing = [s - u for s, u in zip(per["sonde"], per["untimed"])]
    print(f"  adaptive - untimed (1 in 16 timed vs 1 in 1024), ns/call: {spread(timing)}")
    print(f"  sonde - untimed (every call timed vs 1 in 1024), ns/call: {spread(full_timing)}")
    amortised = statistics.median(timing)
    figure(cfg, "call.adaptive", timing)
    summary.add("1b. adaptive timing, amortised clock cost per call",
                f"{amortised:.1f} ns/call (SONDE_ADAPTIVE=1 − 1 in 1024, median of {rounds} "
                f"paired rounds)",
                f"full timing {statistics.median(full_timing):.1f} ns/call; added over the shim: "
                f"full {statistics.median(added):.1f}, adaptive "
                f"{statistics.median(a - b for a, b in zip(per['adaptive'], per['shim'])):.1f} "
                f"ns/call", "≤ 5 ns", amortised <= 5)


# ----------------------------------------------------------------------------------------------
# 2. Reference workload: mlp_train wall time, paired


def bench_mlp(cfg, summary):
    steps = cfg.size(300, 10)
    pairs = cfg.pairs or cfg.size(9, 1)
    section(f"2. mlp_train --steps {steps}: wall time with and without sonde, {pairs} pairs, "
            f"OPENBLAS_NUM_THREADS={cfg.blas_threads}")
    prog = [cfg.mlp, "--steps", str(steps)]
    env = {"OPENBLAS_NUM_THREADS": str(cfg.blas_threads), "OMP_NUM_THREADS": "1"}
    db = os.path.join(cfg.work, "mlp.db")
    base, prof, ratios, cpu_ratios = [], [], [], []
    for i in range(pairs):
        order = ["base", "sonde"] if i % 2 == 0 else ["sonde", "base"]
        got, cpu = {}, {}
        for which in order:
            res = run(prog, env_extra=env, preload=cfg.lib if which == "sonde" else None,
                      output=db if which == "sonde" else None)
            got[which] = res.wall_s
            cpu[which] = res.cpu_s
            if which == "sonde":
                nodes, calls = routine_calls(db, "cblas_sgemm")
                expect(calls > 0, "the mlp_train profile has no cblas_sgemm calls")
        base.append(got["base"])
        prof.append(got["sonde"])
        ratios.append(100.0 * (got["sonde"] / got["base"] - 1.0))
        cpu_ratios.append(100.0 * (cpu["sonde"] / cpu["base"] - 1.0))
        print(f"  pair {i + 1}: without {got['base']:.3f} s, with {got['sonde']:.3f} s, "
              f"overhead {ratios[-1]:+.2f} % (CPU time {cpu_ratios[-1]:+.2f} %)", flush=True)
    print(f"  without sonde, s: {spread(base)}")
    print(f"  with sonde, s:    {spread(prof)}")
    print(f"  overhead per pair, %: {spread(ratios)}")
    print(f"  CPU-time (user+sys) overhead per pair, %: {spread(cpu_ratios)}")
    best = 100.0 * (min(prof) / min(base) - 1.0)
    print(f"  overhead of the fastest runs (min/min), %: {best:+.2f}")
    # What the overhead should be, from parts measured separately: the calls the profile
    # counts times the per-call cost of benchmark 1, plus sonde's fixed start-up and exit cost
    # (a program making one call, with and without sonde, interleaved).
    measured = profile_query(db, "SELECT COALESCE(SUM(calls), 0) FROM nodes WHERE depth > 0")
    n_calls = measured[0][0]
    tiny = [cfg.bench("bench_call_cost"), "--calls", "1", "--reps", "1"]
    fixed_base, fixed_prof = [], []
    for r in range(cfg.size(15, 3)):
        fixed_base.append(run(tiny).wall_s)
        fixed_prof.append(run(tiny, preload=cfg.lib, output=os.path.join(cfg.work, "tiny.db"))
                          .wall_s)
    fixed = statistics.median(fixed_prof) - statistics.median(fixed_base)
    per_call = getattr(cfg, "added_ns", 25.0)
    estimate = 100.0 * (n_calls * per_call * 1e-9 + fixed) / statistics.median(base)
    print(f"  measured frames in the profile (calls + region entries): {n_calls:,}")
    print(f"  fixed start-up + exit cost of sonde (1-call program, median of "
          f"{len(fixed_base)}): {fixed * 1e3:.1f} ms")
    print(f"  expected overhead = {n_calls:,} x {per_call:.1f} ns + {fixed * 1e3:.1f} ms = "
          f"{estimate:.3f} % of {statistics.median(base):.2f} s")
    med = statistics.median(ratios)
    figure(cfg, "mlp.overhead", ratios)
    summary.add(f"2. mlp_train --steps {steps} wall-time overhead",
                f"{med:+.2f} % (median of {pairs} pairs; range {min(ratios):+.2f} to "
                f"{max(ratios):+.2f} %)",
                f"without {statistics.median(base):.3f} s, with "
                f"{statistics.median(prof):.3f} s; min/min {best:+.2f} %; CPU time "
                f"{statistics.median(cpu_ratios):+.2f} %; expected from parts "
                f"{estimate:.2f} %",
                "< 2 %", med < 2)


# ----------------------------------------------------------------------------------------------
# 3. Memory: many calls over a bounded set of call paths


def bench_memory(cfg, summary):
    calls = cfg.size(10_000_000, 1_000_000)
    paths, rounds = 1000, 10
    section(f"3. Peak RSS: {calls:,} intercepted calls over {paths:,} call paths")
    prog = [cfg.bench("bench_memory"), "--calls", str(calls), "--paths", str(paths),
            "--rounds", str(rounds)]
    one_path = [cfg.bench("bench_memory"), "--calls", str(calls), "--paths", "1",
                "--rounds", str(rounds)]
    db = os.path.join(cfg.work, "memory.db")
    base, prof, prof1 = [], [], []
    for r in range(cfg.size(3, 1, guard=2)):
        # The programs' own VmHWM, read after their sonde_flush(): wait4's ru_maxrss would
        # also count this Python process, whose peak a child inherits through fork and exec.
        res = run(prog)
        base.append(res.get("peak_rss_kib", int))
        for cmd, sink, n_paths in ((prog, prof, paths), (one_path, prof1, 1)):
            res = run(cmd, preload=cfg.lib, output=db)
            sink.append(res.get("peak_rss_kib", int))
            made = res.get("calls_total", int)
            expect(res.get("flush_status", int) == 0, "sonde_flush() failed in bench_memory")
            nodes, counted = routine_calls(db, "cblas_sdot")
            expect(counted == made == calls,
                   f"the profile counts {counted} cblas_sdot calls, the program made {made}")
            expect(nodes == n_paths, f"cblas_sdot has {nodes} call paths, expected {n_paths}")
            regions = profile_query(db, "SELECT COUNT(*), SUM(n.calls) FROM nodes n JOIN "
                                        "routines r USING (routine_id) WHERE r.kind = 'region'")
            expect(regions[0] == (n_paths, n_paths * rounds),
                   f"region nodes/calls {regions[0]}, expected {(n_paths, n_paths * rounds)}")
    extra = [p - b for p, b in zip(prof, base)]
    extra1 = [p - b for p, b in zip(prof1, base)]
    mib = lambda kib: kib / 1024.0
    print(f"  peak RSS without sonde, MiB: {spread([mib(x) for x in base])}")
    print(f"  peak RSS with sonde, MiB:    {spread([mib(x) for x in prof])}")
    print(f"  extra RSS, {paths} paths, MiB: {spread([mib(x) for x in extra])}")
    print(f"  extra RSS, 1 path (fixed cost of the library), MiB: "
          f"{spread([mib(x) for x in extra1])}")
    med = mib(statistics.median(extra))
    figure(cfg, "memory.extra", [mib(x) for x in extra])
    summary.add(f"3. extra peak RSS, {calls / 1e6:g} M calls over {paths} paths",
                f"{med:.1f} MiB (median of {len(extra)})",
                f"without {mib(statistics.median(base)):.1f} MiB, with "
                f"{mib(statistics.median(prof)):.1f} MiB; same calls over 1 path: +"
                f"{mib(statistics.median(extra1)):.1f} MiB",
                "< 10 MB", med * 1.048576 < 10)


# ----------------------------------------------------------------------------------------------
# 4. Flush cost


def schema_sql(cfg):
    """The tables, then the views: the script libsonde runs (kSchemaSql)."""
    parts = []
    for name in ("store_schema.sql", "store_views.sql"):
        with open(os.path.join(cfg.source, "libprof", "src", "store", name)) as f:
            parts.append(f.read())
    return "\n".join(parts)


def schema_version(cfg):
    """kSchemaVersion, as schema_version.hpp says."""
    with open(os.path.join(cfg.source, "libprof", "src", "store", "schema_version.hpp")) as f:
        return re.search(r"kSchemaVersion = (\d+);", f.read()).group(1)


def plain_insert_s(cfg, n_routines, node_parents):
    """Seconds for a plain sqlite3 transaction inserting the same rows into a fresh file."""
    path = os.path.join(cfg.work, "plain_insert.db")
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.executescript(schema_sql(cfg))
    db.execute("PRAGMA synchronous=NORMAL")
    db.commit()
    routines = [(f"f{i:06d}", "region", "", "", 0) for i in range(n_routines)]
    nodes = [(i + 1, 1, parent, 1 + (i % n_routines), 1, 0, 1, 0, 1000, 1000, 0.0, 0.0)
             for i, parent in enumerate(node_parents)]
    t0 = time.perf_counter()
    with db:
        db.executemany("INSERT OR IGNORE INTO routines (name, kind, library, file, line) "
                       "VALUES (?,?,?,?,?)", routines)
        db.executemany("INSERT INTO nodes (node_id, thread_id, parent_id, routine_id, depth, "
                       "recursive, calls, subrs, incl_ns, excl_ns, flops, bytes) "
                       "VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", nodes)
    t = time.perf_counter() - t0
    db.close()
    return t


def bench_flush(cfg, summary):
    paths = cfg.size(100_000, 5_000)
    fanout = cfg.size(1000, 100)
    section(f"4. One sonde_flush() writing {paths:,} new call paths (SONDE_FLUSH_INTERVAL=0)")
    db = os.path.join(cfg.work, "flush.db")
    env = {"SONDE_FLUSH_INTERVAL": "0"}
    layouts = [("flat", 0), ("tree", fanout)]
    res_by = {name: {"flush1_s": [], "flush2_s": [], "create_s": []} for name, _ in layouts}
    plain = []
    for r in range(cfg.size(3, 1)):
        for name, f in layouts:
            res = run([cfg.bench("bench_flush"), "--paths", str(paths), "--fanout", str(f)],
                      env_extra=env, preload=cfg.lib, output=db)
            for k in res_by[name]:
                res_by[name][k].append(res.get(k))
            expect(res.get("flush_status", str) == "0 0", "sonde_flush() failed in bench_flush")
            groups = paths // f if f else 0
            rows = profile_query(db, "SELECT COUNT(*), SUM(n.calls = 1), SUM(n.calls) FROM "
                                     "nodes n JOIN routines r USING (routine_id) "
                                     "WHERE r.kind = 'region'")
            want = paths + groups
            expect(rows[0] == (want, want, want),
                   f"{name}: region nodes (count, called once, calls) = {rows[0]}, "
                   f"expected {want} each")
        # The same rows (flat layout: one routine per path) through a plain sqlite3 transaction.
        plain.append(plain_insert_s(cfg, paths, [1] * paths))
    for name, f in layouts:
        desc = "flat: paths distinct regions under the root, as many routines" if not f else \
            f"tree: {paths // f} regions x {f} shared names, {paths // f + f} routines"
        print(f"  {name} ({desc})")
        for k in ("create_s", "flush1_s", "flush2_s"):
            label = {"create_s": "creating the paths (not the target)",
                     "flush1_s": "first flush (inserts)", "flush2_s": "second flush (updates)"}[k]
            print(f"    {label}, s: {spread(res_by[name][k])}")
    print(f"  plain sqlite3 (Python) inserting {paths:,} routines + {paths:,} nodes in one "
          f"transaction, s: {spread(plain)}")
    flat = statistics.median(res_by["flat"]["flush1_s"])
    tree = statistics.median(res_by["tree"]["flush1_s"])
    base = statistics.median(plain)
    figure(cfg, "flush.vs_sqlite", [f / p for f, p in zip(res_by["flat"]["flush1_s"], plain)])
    summary.add(f"4. first flush of {paths / 1000:g}k new call paths",
                f"{flat:.3f} s (flat, {paths / 1000:g}k routines too); {tree:.3f} s (tree, "
                f"{paths // fanout + fanout} routines)",
                f"plain sqlite3 insert of the same flat rows {base:.3f} s (×{flat / base:.1f}); "
                f"second flush {statistics.median(res_by['flat']['flush2_s']):.3f} s",
                "< 0.5 s", flat < 0.5)


# ----------------------------------------------------------------------------------------------
# 5. sonde report on a large file


def make_big_profile(cfg, path, n_nodes, n_routines, seed=1):
    """A profile (schema_version.hpp's version): one run, process and thread, n_nodes in a tree."""
    rnd = random.Random(seed)
    if os.path.exists(path):
        os.unlink(path)
    db = sqlite3.connect(path)
    db.executescript(schema_sql(cfg))
    now = time.time_ns()
    with db:
        db.execute("INSERT INTO meta VALUES ('schema_version', ?), "
                   "('created_by', 'run_benchmarks.py')", (schema_version(cfg),))
        db.execute("INSERT INTO runs VALUES (1, 'bench-0000', ?, 'synthetic', 'bench', "
                   "'synthetic', 2, 2, 'profile')", (now,))
        db.execute("INSERT INTO processes (process_id, run_id, pid, ppid, origin, command, "
                   "started_ns, ended_ns, last_flush_ns, flushes, end_reason) "
                   "VALUES (1, 1, 1000, 1, 'root', 'synthetic', ?, ?, ?, 1, 'exit')",
                   (now, now + 60 * 10**9, now + 60 * 10**9))
        db.execute("INSERT INTO run_info VALUES (1, 1, 'blas.library', 'libopenblas.so')")
        db.execute("INSERT INTO threads (thread_id, process_id, seq, tid, name, started_ns, "
                   "ended_ns, ftz, daz) VALUES (1, 1, 0, 1000, 'main', ?, ?, 0, 0)",
                   (now, now + 60 * 10**9))
        kinds = ["blas"] * 60 + ["region"] * 40
        routines = [(1, "<thread>", "root", "", "", 0)]
        for i in range(2, n_routines + 1):
            kind = "python" if i > 100 else kinds[i % 100]
            routines.append((i, f"{kind}_routine_{i}", kind,
                             "libopenblas.so" if kind == "blas" else "",
                             f"model/layer_{i % 97}.py" if kind == "python" else "",
                             i % 500 if kind == "python" else 0))
        db.executemany("INSERT INTO routines (routine_id, name, kind, library, file, line) "
                       "VALUES (?,?,?,?,?,?)", routines)
        # A random recursive tree (depth ~ ln n), routines skewed towards the first ones.
        parent = [0] * (n_nodes + 1)
        depth = [0] * (n_nodes + 1)
        excl = [0] * (n_nodes + 1)
        incl = [0] * (n_nodes + 1)
        subrs = [0] * (n_nodes + 1)
        routine = [1] * (n_nodes + 1)
        calls = [1] * (n_nodes + 1)
        for i in range(2, n_nodes + 1):
            p = rnd.randrange(max(1, i - 5000), i)
            parent[i] = p
            depth[i] = depth[p] + 1
            routine[i] = 2 + min(int(rnd.paretovariate(1.2)) - 1, n_routines - 2) \
                if rnd.random() < 0.5 else rnd.randrange(2, n_routines + 1)
            calls[i] = rnd.randrange(1, 1000)
            excl[i] = calls[i] * rnd.randrange(100, 100000)
            subrs[p] += calls[i]
        incl[:] = excl
        for i in range(n_nodes, 1, -1):
            incl[parent[i]] += incl[i]
        # A node whose routine is also one of its callers' is recursive, as the writer marks it
        # (core/snapshot.cpp): left unmarked, the tree's ~400-deep repeats counted the routines'
        # inclusive time many times over (hotspots at 5690 % of the threads' time).
        children = [[] for _ in range(n_nodes + 1)]
        for i in range(2, n_nodes + 1):
            children[parent[i]].append(i)
        recursive = [0] * (n_nodes + 1)
        on_path = {}
        todo = [(1, True)]
        while todo:
            i, entering = todo.pop()
            if not entering:
                on_path[routine[i]] -= 1
                continue
            recursive[i] = int(on_path.get(routine[i], 0) > 0)
            on_path[routine[i]] = on_path.get(routine[i], 0) + 1
            todo.append((i, False))
            todo.extend((c, True) for c in children[i])
        rows = ((i, 1, parent[i] or None, routine[i], depth[i], recursive[i], calls[i], subrs[i], incl[i],
                 excl[i], float(calls[i]) * 1e6 if i % 3 == 0 else 0.0,
                 float(calls[i]) * 4e5) for i in range(1, n_nodes + 1))
        db.executemany("INSERT INTO nodes VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        # The per-routine sums the writer keeps with its nodes (store_nodes.cpp), from the rows
        # just written: test_one_truth checks a real writer's against its nodes.
        db.execute("INSERT INTO thread_routine_sums SELECT thread_id, routine_id, "
                   "parent_id IS NULL, SUM(calls), SUM(subrs), SUM(CASE WHEN recursive = 0 "
                   "THEN incl_ns ELSE 0 END), SUM(excl_ns), SUM(flops), SUM(bytes) FROM nodes "
                   "GROUP BY thread_id, routine_id, parent_id IS NULL")
    db.close()


def cached_big_profile(cfg, path, n_nodes, n_routines):
    """make_big_profile's file at `path`, copied from <build>/tests/bench/cache when an earlier
    run made the same one (same sizes, schema and generator): making it takes longer than the
    benchmark. A copy each run, so that whatever a reader writes into it is not kept. Returns
    whether it was made now."""
    key = hashlib.sha256(json.dumps([n_nodes, n_routines, schema_sql(cfg), schema_version(cfg),
                                     inspect.getsource(make_big_profile)]).encode()).hexdigest()
    cache = os.path.join(cfg.bench_dir, "cache", f"big-{key[:16]}.db")
    if os.path.exists(cache):
        shutil.copyfile(cache, path)
        return False
    make_big_profile(cfg, path, n_nodes, n_routines)
    os.makedirs(os.path.dirname(cache), exist_ok=True)
    shutil.copyfile(path, cache + ".tmp")
    os.replace(cache + ".tmp", cache)
    return True


def bench_report(cfg, summary):
    n_nodes = cfg.size(1_000_000, 50_000)
    n_routines = cfg.size(5_000, 500)
    section(f"5. sonde report on a profile of {n_nodes:,} node rows, {n_routines:,} routines")
    path = os.path.join(cfg.work, "big.db")
    t0 = time.perf_counter()
    made = cached_big_profile(cfg, path, n_nodes, n_routines)
    print(f"  ({'made the file' if made else 'copied the file made by an earlier run'} in "
          f"{time.perf_counter() - t0:.1f} s, {os.path.getsize(path) / 2**20:.0f} MiB)")
    rows = profile_query(path, "SELECT COUNT(*) FROM nodes")
    expect(rows[0][0] == n_nodes, f"the synthetic file has {rows[0][0]} nodes")
    have_cli = os.path.exists(cfg.cli)
    if not have_cli:
        print(f"  NOTE: {cfg.cli} does not exist; timing the hotspots view instead")

    def scan():
        return bare_scan_s(path)

    def report():
        if have_cli:
            res = run([cfg.cli, "report", path])
            lines = res.stdout.count("\n")
            expect(lines >= n_routines, f"sonde report printed {lines} lines for "
                                        f"{n_routines} routines")
            return res.wall_s
        t = time.perf_counter()
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        got = db.execute("SELECT * FROM hotspots ORDER BY excl_s DESC").fetchall()
        db.close()
        expect(len(got) == n_routines, f"hotspots has {len(got)} rows")
        return time.perf_counter() - t

    scan()  # warm the page cache for both
    rep, base = [], []
    for r in range(cfg.size(5, 2)):
        for fn, sink in ((report, rep), (scan, base)) if r % 2 == 0 else \
                ((scan, base), (report, rep)):
            sink.append(fn())
    what = "sonde report FILE" if have_cli else "SELECT * FROM hotspots ORDER BY excl_s DESC"
    print(f"  {what}, s (whole process): {spread(rep)}")
    print(f"  sqlite3 module, SELECT count(*), sum(excl_ns) FROM nodes, s: {spread(base)}")
    med, b = statistics.median(rep), statistics.median(base)
    figure(cfg, "report.vs_scan", [x / y for x, y in zip(rep, base)])  # paired in a round
    summary.add(f"5. `{what}` on {n_nodes / 1e6:g} M node rows",
                f"{med:.3f} s (median of {len(rep)}; range {min(rep):.3f}–{max(rep):.3f})",
                f"full scan count/sum {b:.3f} s (×{med / b:.1f})", "< 1 s", med < 1)
    if have_cli and python_ready(cfg, "the forked run's report"):
        bench_report_forked(cfg, summary)


def bench_report_forked(cfg, summary):
    """sonde report on a real run shaped like a DataLoader's: processes forked from inside the
    parent's calls (their inherited frames), each with a thread waiting for work and joined
    (the waits the views take out of the 100 %). The synthetic file above has one thread and no
    wait: on a 100-epoch DataLoader profile (201 processes, 103k nodes) the report read 47 × a
    scan while this figure said 2 ×, each view of the waits evaluated five times (2026-12-07)."""
    workers, depth = cfg.size(200, 20), cfg.size(3, 2)
    path = os.path.join(cfg.work, "forked.db")
    script = os.path.join(HERE, "py_forking_run.py")
    run([cfg.python, "-m", "sonde", "--force", "-o", path, script, str(workers), str(depth)],
        env_extra={"PYTHONPATH": cfg.pypath})
    # Each worker calls f0 once at the top and once under each of the 8 functions a level up.
    calls = workers * sum(8 ** k for k in range(depth + 1))
    got = profile_query(path, "SELECT SUM(n.calls) FROM nodes n JOIN routines r "
                              "USING (routine_id) WHERE r.name LIKE '%(f0)'")[0][0]
    expect(got == calls, f"the forked run's profile holds {got} calls of f0 for {calls}")
    nodes, processes = profile_query(path, "SELECT (SELECT COUNT(*) FROM nodes), "
                                           "(SELECT COUNT(*) FROM processes)")[0]
    section(f"5a. sonde report on a forked run: {processes} processes, {nodes:,} node rows")
    bare_scan_s(path)  # warm the page cache
    def report():
        return run([cfg.cli, "report", path]).wall_s

    def scan():
        return bare_scan_s(path)

    rep, base = [], []
    for r in range(cfg.size(5, 2)):
        for fn, sink in ((report, rep), (scan, base)) if r % 2 == 0 else \
                ((scan, base), (report, rep)):
            sink.append(fn())
    print(f"  sonde report FILE, s (whole process): {spread(rep)}")
    print(f"  sqlite3 module, SELECT count(*), sum(excl_ns) FROM nodes, s: {spread(base)}")
    ratios = [x / y for x, y in zip(rep, base)]
    figure(cfg, "report.forked", ratios)
    med = statistics.median(ratios)
    summary.add(f"5a. `sonde report` on {processes} forked processes' {nodes / 1e6:.2g} M node rows",
                f"{statistics.median(rep):.3f} s (median of {len(rep)})",
                f"full scan count/sum {statistics.median(base):.3f} s (×{med:.1f})", "≤ 5 × scan",
                med <= 5)


# ----------------------------------------------------------------------------------------------
# 5b. sonde view --html and the folded export on the same large file


def bench_view(cfg, summary):
    """The whole viewer bundle as one HTML file, the folded stacks and the merged tree of
    section 5's file, each paired in a round with the same bare scan as `report.vs_scan` (issue
    35: the bundle took 5 s and 580 MB, the folded export 81 s and 4.7 GB, `sonde tree --threads
    merge` 96 s and 2 GB, against 0.7 s for the report)."""
    n_nodes = cfg.size(1_000_000, 50_000)
    n_routines = cfg.size(5_000, 500)
    section(f"5b. sonde view --html, export --format folded and tree --threads merge on "
            f"{n_nodes:,} node rows")
    path = os.path.join(cfg.work, "big.db")
    made = cached_big_profile(cfg, path, n_nodes, n_routines)
    print(f"  ({'made' if made else 'copied'} the file of section 5)")
    if not os.path.exists(cfg.cli):
        print(f"  NOTE: {cfg.cli} does not exist; skipping")
        return
    html = os.path.join(cfg.work, "big.html")

    def scan():
        return bare_scan_s(path)

    def view():
        res = run([cfg.cli, "view", "--html", html, "--force", path], own_peak=True)
        with open(html, encoding="utf-8", errors="replace") as f:
            expect('<script id="sonde-data"' in f.read(), f"{html} holds no data element")
        peaks.append(res.maxrss_kib / 1024)
        return res.wall_s

    def folded():
        return run([cfg.cli, "export", path, "--format", "folded", "-o", os.devnull]).wall_s

    def merged():
        res = run([cfg.cli, "tree", path, "--threads", "merge"])
        expect(" merged: " in res.stdout, "sonde tree --threads merge printed no tree")
        return res.wall_s

    try:
        peaks = []
        view()  # and warms the page cache, for the scan too
    except BenchError as e:
        if "viewer is not built" not in str(e):
            raise
        print("  NOTE: the browser viewer is not built (sonde_viewer); skipping")
        return
    views, folds, merges, base = [], [], [], []
    peaks = []
    for r in range(cfg.size(3, 2)):
        order = ((view, views), (folded, folds), (merged, merges), (scan, base))
        for fn, sink in order if r % 2 == 0 else order[::-1]:
            sink.append(fn())
    print(f"  sonde view --html FILE, s (whole process): {spread(views)}; peak RSS, MiB "
          f"(its own): {spread(peaks)}")
    print(f"  sonde export FILE --format folded -o /dev/null, s: {spread(folds)}")
    print(f"  sonde tree FILE --threads merge, s: {spread(merges)}")
    print(f"  sqlite3 module, SELECT count(*), sum(excl_ns) FROM nodes, s: {spread(base)}")
    b = statistics.median(base)
    figure(cfg, "view.vs_scan", [x / y for x, y in zip(views, base)])
    figure(cfg, "folded.vs_scan", [x / y for x, y in zip(folds, base)])
    figure(cfg, "tree_merge.vs_scan", [x / y for x, y in zip(merges, base)])
    med = statistics.median(views)
    summary.add(f"5b. `sonde view --html` on {n_nodes / 1e6:g} M node rows",
                f"{med:.3f} s, peak {statistics.median(peaks):.0f} MiB",
                f"full scan count/sum {b:.3f} s (×{med / b:.1f})",
                "<= 5 × scan (3 × the report's), < 250 MiB",
                med / b <= 5 and statistics.median(peaks) < 250)
    med = statistics.median(folds)
    summary.add(f"5b. `sonde export --format folded` on {n_nodes / 1e6:g} M node rows",
                f"{med:.3f} s", f"full scan count/sum {b:.3f} s (×{med / b:.1f})",
                "<= 15 × scan (a few seconds)", med / b <= 15)
    med = statistics.median(merges)
    summary.add(f"5b. `sonde tree --threads merge` on {n_nodes / 1e6:g} M node rows",
                f"{med:.3f} s", f"full scan count/sum {b:.3f} s (×{med / b:.1f})",
                "none set (before: 96 s, 2 GB)", None)


# ----------------------------------------------------------------------------------------------
# 6. Python: added time per Python-level call, against cProfile and yappi


def python_ready(cfg, what):
    """False (with a note) when the Python hook was not built: the section is skipped."""
    if not os.path.isdir(cfg.pypkg):
        print(f"  NOTE: {cfg.pypkg} does not exist (the Python hook is not built); "
              f"skipping {what}")
        return False
    return True


def python_version(py):
    """'3.11' for a CPython 3.11 interpreter."""
    return subprocess.run([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                          capture_output=True, text=True, check=True).stdout.strip()


def python_env(cfg):
    return {"PYTHONPATH": cfg.pypath, "PYTHONDONTWRITEBYTECODE": "1"}


def python_frames(path, script, func):
    """(nodes, total calls) of the Python function `func` of `script` in a sonde profile."""
    rows = profile_query(path, "SELECT COUNT(*), COALESCE(SUM(n.calls), 0) FROM nodes n "
                               "JOIN routines r USING (routine_id) WHERE r.kind = 'python' "
                               "AND r.name GLOB ? AND r.file LIKE ?",
                         (f"*({func})", f"%{script}"))
    return rows[0]


# The two ways python3 -m sonde records Python frames: the default (Python frames only: CPython
# 3.10's and 3.11's frame-evaluation hook, sys.monitoring on 3.12+) and --builtins (C functions
# too: the profile function on 3.10 and 3.11, sys.monitoring on 3.12+). Both are measured in the same rounds.
SONDE_PY_MODES = {"sonde": [], "sonde-builtins": ["--builtins"]}


def bench_python(cfg, summary):
    n, reps, loop = cfg.size(25, 20), cfg.size(4, 1), cfg.size(100_000, 10_000)
    rounds = cfg.size(9, 2, guard=5)
    section(f"6. Python call overhead: py_callheavy.py (fib({n}) + {loop:,} turns of 4 method "
            f"calls) x {reps}, {rounds} rounds")
    if not python_ready(cfg, "the Python benchmarks"):
        return
    script = os.path.join(HERE, "py_callheavy.py")
    args = ["--n", str(n), "--reps", str(reps), "--loop", str(loop)]
    db = os.path.join(cfg.work, "py_callheavy.db")
    py = cfg.python
    variants = [("plain", [py, script, *args]),
                ("cProfile", [py, "-m", "cProfile", "-o", os.devnull, script, *args])]
    runner = os.path.join(HERE, "py_profiler_run.py")
    have_yappi = subprocess.run([py, "-c", "import yappi"], capture_output=True).returncode == 0
    if have_yappi:
        variants.append(("yappi", [py, runner, "yappi-" + cfg.yappi_clock, script, *args]))
    else:
        print(f"  NOTE: {py} cannot import yappi; no yappi comparison")
    # The floor: a C profile function that does nothing (tests/bench/py_noop_profiler.c).
    have_noop = subprocess.run([py, "-c", "import _noop_profiler"], capture_output=True,
                               env={**os.environ, "PYTHONPATH": cfg.bench_dir}).returncode == 0
    # On 3.12+ the floor of sonde's default hook: a sys.monitoring callback that does nothing.
    have_noop_mon = have_noop and subprocess.run(
        [py, "-c", "import sys; sys.monitoring"], capture_output=True).returncode == 0
    if have_noop:
        variants.append(("noop", [py, runner, "noop", script, *args]))
        if have_noop_mon:
            variants.append(("noop-monitoring", [py, runner, "noop-monitoring", script, *args]))
    else:
        print(f"  NOTE: no _noop_profiler module for {py} in {cfg.bench_dir}; no floor "
              f"measured")
    for mode, opts in SONDE_PY_MODES.items():
        variants.append((mode, [py, "-m", "sonde", *opts, "-o", db, "--force", script, *args]))
    names = [name for name, _ in variants]
    elapsed = {name: [] for name in names}
    whole = {name: [] for name in names}
    calls_total = None
    for r in range(rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for name, cmd in order:
            env = python_env(cfg)
            if name.startswith("noop"):
                env["PYTHONPATH"] = cfg.bench_dir + os.pathsep + env["PYTHONPATH"]
            res = run(cmd, env_extra=env)
            elapsed[name].append(res.get("elapsed_s"))
            whole[name].append(res.wall_s)
            fib_calls, method_calls = res.get("fib_calls", int), res.get("method_calls", int)
            calls_total = res.get("calls_total", int)
            if name in SONDE_PY_MODES:
                nodes, counted = python_frames(db, "py_callheavy.py", "fib")
                expect(counted == fib_calls, f"the {name} profile counts {counted} calls of "
                                             f"fib(), the benchmark made {fib_calls}")
                expect(nodes == max(n, 1), f"fib() has {nodes} call paths in the {name} "
                                           f"profile, expected {max(n, 1)} (one per depth)")
                methods = sum(python_frames(db, "py_callheavy.py", m)[1]
                              for m in ("move", "dot", "norm2", "__init__"))
                expect(methods == method_calls,
                       f"the {name} profile counts {methods} calls of Point's methods, the "
                       f"benchmark made {method_calls}")
    print(f"  {calls_total:,} Python-level calls in the measured part "
          f"({fib_calls:,} of fib); both sonde profiles hold exactly the fib() and method calls "
          f"the benchmark counted")
    for name in names:
        print(f"  {name:14s} measured part, s: {spread(elapsed[name])}")
    added = {name: [e - b for e, b in zip(elapsed[name], elapsed["plain"])]
             for name in names if name != "plain"}  # paired within a round
    for name, xs in added.items():
        print(f"  {name:14s} added over plain, s: {spread(xs)}; per call, ns: "
              f"{statistics.median(xs) / calls_total * 1e9:.0f}")
    ratio_c, ratio_y = {}, {}
    for mode in SONDE_PY_MODES:
        ratio_c[mode] = [s / c for s, c in zip(added[mode], added["cProfile"])]
        print(f"  {mode}'s added time / cProfile's (per round): {spread(ratio_c[mode])}")
        if have_yappi:
            ratio_y[mode] = [s / y for s, y in zip(added[mode], added["yappi"])]
            print(f"  {mode}'s added time / yappi's ({cfg.yappi_clock} clock, per round): "
                  f"{spread(ratio_y[mode])}")
    if have_noop:
        floor_c = [f / c for f, c in zip(added["noop"], added["cProfile"])]
        print(f"  the no-op profile hook's added time / cProfile's (the least any profile hook "
              f"can reach; the default sonde mode uses no profile hook): {spread(floor_c)}")
    if have_noop_mon:
        floor_m = [f / c for f, c in zip(added["noop-monitoring"], added["cProfile"])]
        print(f"  the no-op sys.monitoring callbacks' added time / cProfile's (the floor of "
              f"sonde's default hook on 3.12+): {spread(floor_m)}")
        own_m = [x - f for x, f in zip(added["sonde"], added["noop-monitoring"])]
        print(f"  sonde          own work beyond the no-op sys.monitoring callbacks (paired), s: "
              f"{spread(own_m)}; per call, ns: {statistics.median(own_m) / calls_total * 1e9:.0f}")
    if have_noop:
        own = {name: [x - f for x, f in zip(added[name], added["noop"])]
               for name in ("cProfile", "yappi", "sonde-builtins") if name in added}
        for name, xs in own.items():
            print(f"  {name:14s} own work beyond the no-op hook (paired), s: {spread(xs)}; per "
                  f"call, ns: {statistics.median(xs) / calls_total * 1e9:.0f}")
    for name in names:
        print(f"  {name:14s} whole process (start-up, re-exec, flush), s: {spread(whole[name])}")
    med = {name: statistics.median(xs) for name, xs in added.items()}
    per_call = lambda name: med[name] / calls_total * 1e9
    comparison = (f"plain {statistics.median(elapsed['plain']):.3f} s; added: cProfile "
                  f"+{med['cProfile']:.3f} s ({per_call('cProfile'):.0f} ns/call)")
    if have_yappi:
        comparison += (f", yappi ({cfg.yappi_clock}) +{med['yappi']:.3f} s "
                       f"({per_call('yappi'):.0f} ns/call)")
    if have_noop:
        comparison += (f", a no-op C profile hook +{med['noop']:.3f} s "
                       f"(= {statistics.median(floor_c):.2f} × cProfile's)")
    if have_noop_mon:
        comparison += (f", no-op sys.monitoring callbacks +{med['noop-monitoring']:.3f} s "
                       f"(= {statistics.median(floor_m):.2f} × cProfile's)")
    version = python_version(py)
    figure(cfg, f"python{version}.default", ratio_c["sonde"])
    figure(cfg, f"python{version}.builtins", ratio_c["sonde-builtins"])
    for mode in SONDE_PY_MODES:
        rc = statistics.median(ratio_c[mode])
        vs_yappi = (f"; / yappi's {statistics.median(ratio_y[mode]):.2f}" if have_yappi else "")
        what = "default: Python frames" if mode == "sonde" else "--builtins: C functions too"
        summary.add(f"6. Python call overhead, {calls_total / 1e6:.2g} M calls, {what}",
                    f"{mode} +{med[mode]:.3f} s ({per_call(mode):.0f} ns/call) = "
                    f"{rc:.2f} × cProfile's added time (median of {rounds} rounds; range "
                    f"{min(ratio_c[mode]):.2f}–{max(ratio_c[mode]):.2f}){vs_yappi}",
                    comparison, "< 0.5 × cProfile" if mode == "sonde" else "-",
                    rc < 0.5 if mode == "sonde" else None)


# ----------------------------------------------------------------------------------------------
# 7. Python reference workload: examples/mlp_numpy/train.py, paired


def bench_mlp_numpy(cfg, summary):
    steps = cfg.size(300, 20)
    pairs = cfg.pairs or cfg.size(9, 1)
    section(f"7. mlp_numpy/train.py --steps {steps}: wall time with and without python3 -m "
            f"sonde, {pairs} pairs, OPENBLAS_NUM_THREADS={cfg.blas_threads}")
    if not python_ready(cfg, "mlp_numpy"):
        return
    script = os.path.join(cfg.source, "examples", "mlp_numpy", "train.py")
    py = cfg.python
    if subprocess.run([py, "-c", "import numpy"], capture_output=True).returncode != 0:
        print(f"  NOTE: {py} cannot import numpy; skipping mlp_numpy")
        return
    db = os.path.join(cfg.work, "mlp_numpy.db")
    env = {"OPENBLAS_NUM_THREADS": str(cfg.blas_threads), "OMP_NUM_THREADS": "1",
           **python_env(cfg)}
    cmds = {"base": [py, script, "--steps", str(steps)],
            "sonde": [py, "-m", "sonde", "-o", db, "--force", script, "--steps", str(steps)]}
    base, prof, ratios, cpu_ratios, inner = [], [], [], [], []
    out = {}
    for i in range(pairs):
        order = ["base", "sonde"] if i % 2 == 0 else ["sonde", "base"]
        got, cpu, t_in = {}, {}, {}
        for which in order:
            res = run(cmds[which], env_extra=env)
            got[which], cpu[which] = res.wall_s, res.cpu_s
            t_in[which] = float(res.stderr.split("time_s", 1)[1].split()[0]) \
                if "time_s" in res.stderr else float("nan")
            out[which] = res.stdout
            if which == "sonde":
                _, sgemm = routine_calls(db, "cblas_sgemm")
                # 3 products forward, 5 backward per step; 20 test batches of 3 forward.
                expect(sgemm == 8 * steps + 60, f"the mlp_numpy profile counts {sgemm} "
                                                f"cblas_sgemm calls, expected {8 * steps + 60}")
                _, adam = python_frames(db, "train.py", "update_core_cpu")
                expect(adam == 6 * steps, f"the mlp_numpy profile counts {adam} calls of "
                                          f"update_core_cpu, expected {6 * steps}")
        expect(out["base"] == out["sonde"], "train.py printed different results under sonde")
        base.append(got["base"])
        prof.append(got["sonde"])
        ratios.append(100.0 * (got["sonde"] / got["base"] - 1.0))
        cpu_ratios.append(100.0 * (cpu["sonde"] / cpu["base"] - 1.0))
        inner.append(100.0 * (t_in["sonde"] / t_in["base"] - 1.0))
        print(f"  pair {i + 1}: without {got['base']:.3f} s, with {got['sonde']:.3f} s, "
              f"overhead {ratios[-1]:+.2f} % (CPU time {cpu_ratios[-1]:+.2f} %; train.py's "
              f"own time_s {t_in['base']:.3f} vs {t_in['sonde']:.3f} s, {inner[-1]:+.2f} %)",
              flush=True)
    print(f"  without sonde, s: {spread(base)}")
    print(f"  with sonde, s:    {spread(prof)}")
    print(f"  overhead per pair (whole process), %: {spread(ratios)}")
    print(f"  CPU-time (user+sys) overhead per pair, %: {spread(cpu_ratios)}")
    print(f"  overhead of train.py's own time_s (training loop + test) per pair, %: "
          f"{spread(inner)}")
    best = 100.0 * (min(prof) / min(base) - 1.0)
    print(f"  overhead of the fastest runs (min/min), %: {best:+.2f}")
    frames = profile_query(db, "SELECT r.kind, COUNT(*), SUM(n.calls) FROM nodes n JOIN routines "
                               "r USING (routine_id) WHERE n.depth > 0 GROUP BY r.kind "
                               "ORDER BY r.kind")
    print("  measured frames in the profile by kind (nodes, calls): " +
          ", ".join(f"{k} {nd:,}/{c:,}" for k, nd, c in frames))
    med = statistics.median(ratios)
    figure(cfg, "mlp_numpy.overhead", ratios)
    summary.add(f"7. mlp_numpy/train.py --steps {steps} wall-time overhead",
                f"{med:+.2f} % (median of {pairs} pairs; range {min(ratios):+.2f} to "
                f"{max(ratios):+.2f} %)",
                f"without {statistics.median(base):.3f} s, with {statistics.median(prof):.3f} s; "
                f"min/min {best:+.2f} %; CPU time {statistics.median(cpu_ratios):+.2f} %; "
                f"train.py's own time_s {statistics.median(inner):+.2f} %",
                "< 3 %", med < 3)


# ----------------------------------------------------------------------------------------------
# 8. Fixed costs of python3 -m sonde: an empty script, `import torch`


def bench_fixed(cfg, summary):
    pairs = cfg.size(15, 2, guard=11)
    torch_pairs = cfg.size(7, 0, guard=5)
    section(f"8. Fixed costs of python3 -m sonde: an empty script ({pairs} pairs) and `import "
            f"torch` ({torch_pairs} pairs), each against plain {cfg.python}")
    if not python_ready(cfg, "the fixed costs"):
        return
    py = cfg.python
    # Byte-compiled as an installed package is: otherwise every run compiles sonde's modules.
    subprocess.run([py, "-m", "compileall", "-q", cfg.pypkg], check=True, capture_output=True)
    cases = [("fixed.empty", "empty.py", "", pairs, "python3 -m sonde empty.py", "≤ 1.3 ×")]
    if torch_pairs and subprocess.run([py, "-c", "import torch"],
                                      capture_output=True).returncode == 0:
        cases.append(("fixed.torch", "torch_import.py", "import torch\n", torch_pairs,
                      "python3 -m sonde on `import torch`", "≤ 1.03 ×"))
    elif torch_pairs:
        print(f"  NOTE: {py} cannot import torch; no `import torch` figure")
    db = os.path.join(cfg.work, "fixed.db")
    env = {"PYTHONPATH": cfg.pypath, "OPENBLAS_NUM_THREADS": "1"}
    for fid, name, body, n, what, target in cases:
        script = os.path.join(cfg.work, name)
        with open(script, "w") as f:
            f.write(body)
        # The re-exec launch beside the default (in-process since 2026-12-03; not a recorded
        # figure), in the same rounds, for the choice between them. Without --force, as a user
        # runs again into the same -o: each run keeps the one before as .old, which reads it
        # (until 2026-12-07 --force, and a run into an existing profile cost 10 ms more CPU
        # than the figure showed, 5.6 ms of it urllib.parse's import).
        cmds = {"plain": [py, script], "sonde": [py, "-m", "sonde", "-o", db, script],
                "re-exec": [py, "-m", "sonde", "--re-exec", "-o", db, script]}
        got = {which: [] for which in cmds}
        order = list(cmds)
        for i in range(n):
            for which in order[i % 3:] + order[:i % 3]:
                got[which].append(run(cmds[which], env_extra=env).wall_s)
            if i == 0:
                expect(os.path.exists(db), f"{what} wrote no profile at {db}")
        ratios = [s / p for s, p in zip(got["sonde"], got["plain"])]
        for which in got:
            print(f"  {name} {which}, s: {spread(got[which])}")
        print(f"  sonde / plain per pair: {spread(ratios)}")
        print(f"  --re-exec / plain per pair: "
              f"{spread([s / p for s, p in zip(got['re-exec'], got['plain'])])}")
        figure(cfg, fid, ratios)
        med = statistics.median(ratios)
        summary.add(f"8. {what}", f"{med:.2f} × plain (median of {n} pairs; range "
                                  f"{min(ratios):.2f}–{max(ratios):.2f})",
                    f"plain {statistics.median(got['plain']) * 1e3:.1f} ms, under sonde "
                    f"{statistics.median(got['sonde']) * 1e3:.1f} ms", target,
                    med <= float(target.split()[1]))
    bench_fork_child(cfg, summary, db, env)


def fork_children(cmd, env):
    """[(page copies, ms from the parent's fork() to the child's first line)] of
    py_fork_child.py's children."""
    r = run(cmd, env_extra=env)
    out = [(int(f), float(ms)) for _, f, ms in
           (line.split() for line in r.stdout.splitlines() if line.startswith("child "))]
    expect(out, f"{' '.join(cmd)} printed no child:\n{r.stderr}")
    return out


def bench_fork_child(cfg, summary, db, env):
    """A fork child's start under a parent of 100,000 Python call paths: the pages it copies
    (minor faults) before its first line, as DataLoader workers are forked, against plain's.
    Until 2026-12-07 the child zeroed the parent's whole call tree, and copied every page of it."""
    pairs, paths, children = cfg.size(5, 1, guard=3), cfg.size(100_000, 20_000), 4
    script = os.path.join(HERE, "py_fork_child.py")
    got = {"plain": [], "sonde": []}
    cmds = {"plain": [cfg.python, script, str(paths), str(children)],
            "sonde": [cfg.python, "-m", "sonde", "-o", db, script, str(paths), str(children)]}
    ratios = []
    for i in range(pairs):
        pair = {}
        for which in (("plain", "sonde") if i % 2 == 0 else ("sonde", "plain")):
            pair[which] = fork_children(cmds[which], env)
            got[which].extend(pair[which])
        ratios.append(statistics.median(f for f, _ in pair["sonde"]) /
                      statistics.median(f for f, _ in pair["plain"]))
    for which, kids in got.items():
        print(f"  fork child under {paths:,} paths, {which}: page copies "
              f"{spread([f for f, _ in kids])}; ms from fork() {spread([ms for _, ms in kids])}")
    print(f"  page copies, sonde / plain per pair: {spread(ratios)}")
    figure(cfg, "fixed.fork", ratios)
    med = statistics.median(ratios)
    summary.add(f"8. a fork child under {paths:,} Python call paths (page copies)",
                f"{med:.2f} × plain (median of {pairs} pairs)",
                f"plain {statistics.median(f for f, _ in got['plain']):.0f} pages, under sonde "
                f"{statistics.median(f for f, _ in got['sonde']):.0f}", "≤ 3 ×", med <= 3)


# ----------------------------------------------------------------------------------------------


class Config:
    def __init__(self, args):
        self.quick = args.quick
        # The guard (--compare, --record): full sizes, fewer rounds, unless --full.
        self.guard = (args.compare or args.record) and not args.full and not args.quick
        self.figures = {}  # figure id -> figures_table.Measured, filled by the benchmarks
        self.pairs = args.pairs
        self.blas_threads = args.blas_threads
        build = args.build_dir or os.environ.get("SONDE_BUILD") or \
            os.path.join(HERE, "..", "..", "build")
        self.build = os.path.abspath(build)
        self.source = os.path.abspath(os.environ.get("SONDE_SOURCE") or
                                      os.path.join(HERE, "..", ".."))
        self.lib = os.environ.get("SONDE_LIB") or os.path.join(self.build, "lib", "libsonde.so")
        self.cli = os.environ.get("SONDE_CLI") or os.path.join(self.build, "bin", "sonde")
        self.mlp = os.path.join(self.build, "examples", "mlp_train")
        self.bench_dir = os.path.join(self.build, "tests", "bench")
        self.shim = os.path.join(self.bench_dir, "libbareshim.so")
        # The Python hook: <build>/python/sonde, run by Debian's interpreter (numpy, yappi).
        self.pypath = os.path.join(self.build, "python")
        self.pypkg = os.path.join(self.pypath, "sonde")
        self.python = args.python or ("/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                                      else sys.executable)
        self.yappi_clock = args.yappi_clock
        self.work = args.work_dir or tempfile.mkdtemp(prefix="sonde-bench-")
        os.makedirs(self.work, exist_ok=True)
        for p in (self.lib, self.shim, self.mlp):
            if not os.path.exists(p):
                raise BenchError(f"{p} is missing: build first (cmake --build build)")

    def size(self, full, quick, guard=None):
        """A size or a number of rounds: `guard` (else `full`) when the guard runs."""
        if self.quick:
            return quick
        return guard if self.guard and guard is not None else full

    def bench(self, name):
        p = os.path.join(self.bench_dir, name)
        if not os.path.exists(p):
            raise BenchError(f"{p} is missing: build first (cmake --build build)")
        return p


def machine():
    model = platform.processor() or "?"
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, Linux {platform.release()}"


BENCHES = {"call": bench_call_cost, "mlp": bench_mlp, "memory": bench_memory,
           "flush": bench_flush, "report": bench_report, "view": bench_view,
           "python": bench_python,
           "mlp_numpy": bench_mlp_numpy, "fixed": bench_fixed}


def selected(only, guard):
    """The benchmarks to run, in BENCHES' order, from --only's benchmarks and figure ids."""
    if not only:
        return [b for b in BENCHES if not guard or b in GUARD]
    want = set()
    for name in only.split(","):
        if name in BENCHES:
            want.add(name)
        elif name in FIGURES:
            want.add(FIGURES[name][0])
        else:
            raise BenchError(f"unknown benchmark or figure '{name}' (benchmarks: "
                             f"{', '.join(BENCHES)}; figures: {', '.join(FIGURES)})")
    return [b for b in BENCHES if b in want]


def short_machine():
    """The machine in a few words, for the recorded table."""
    model = machine().split(",")[0]
    model = re.sub(r"\((R|TM)\)|\bCPU\b|\bProcessor\b|@.*|\|", "", model)
    return f"{' '.join(model.split())}, {os.cpu_count()} CPUs"


def source_commit(cfg):
    """The source's commit, '+' when tracked files other than the performance document differ."""
    git = ["git", "-C", cfg.source]
    head = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True).stdout.strip() or "?"
    changed = subprocess.run(git + ["status", "--porcelain", "--untracked-files=no"],
                             capture_output=True, text=True).stdout.splitlines()
    dirty = [c for c in changed if not c.endswith("docs/performance.md")]
    return head + ("+" if dirty else "")


def compare(cfg, doc):
    """Prints every recorded figure beside this run's; returns the ids flagged WORSE."""
    with open(doc) as f:
        rows = figures_table.read(f.read())
    section(f"Against the figures {os.path.relpath(doc)} records"
            + (" (quick mode: other sizes, so indicative only)" if cfg.quick else ""))
    here = short_machine()
    head = ("figure", "now (median ± spread, rounds)", "recorded (± spread; date, commit)",
            "target", "verdict")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    worse, others = [], set()
    for fid in list(rows) + [f for f in cfg.figures if f not in rows]:
        row, m = rows.get(fid), cfg.figures.get(fid)
        rec = "not recorded" if row is None else \
            f"{row.value:.4g} ± {row.spread:.3g} ({row.cells['date']}, {row.cells['commit']})"
        if m is None:
            now, target, verdict = "not measured in this run", row.cells["target"], ""
        else:
            now = f"{m.value:.4g} ± {m.spread:.3g} {m.unit} (n={len(m.values)})"
            tgt = row.target if row else None
            met = figures_table.meets(tgt, m.value)
            target = "-" if tgt is None else \
                f"{row.cells['target']}: {'met' if met else 'MISSED'}"
            verdict = "" if row is None else figures_table.verdict(row, m)
            if row is not None and row.unit != m.unit:
                verdict += f" (recorded in {row.unit}, measured in {m.unit})"
            if verdict.startswith("WORSE"):
                worse.append(fid)
            if row is not None and row.cells["machine"] != here:
                others.add(row.cells["machine"])
        print(f"| {fid} | {now} | {rec} | {target} | {verdict} |")
    print("WORSE: worse than recorded by more than the larger spread (and 2 % of the value); "
          "lower is better for every figure")
    for m in sorted(others):
        print(f"NOTE: some figures were recorded on another machine ({m}); this one is {here}")
    return worse


def record(cfg, doc):
    with open(doc) as f:
        text = f.read()
    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    commit = source_commit(cfg)
    new = figures_table.record(text, cfg.figures, date, commit, short_machine())
    with open(doc, "w") as f:
        f.write(new)
    print(f"\nrecorded {len(cfg.figures)} figures ({', '.join(cfg.figures)}) in "
          f"{os.path.relpath(doc)}, {date}, commit {commit}")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true",
                    help="small sizes (< 60 s): proves the benchmarks work, figures indicative")
    ap.add_argument("--build-dir", help="the CMake build folder (default: $SONDE_BUILD or ./build)")
    ap.add_argument("--work-dir", help="where profiles and scratch files go (default: a temp dir)")
    ap.add_argument("--only", help="comma-separated benchmarks (" + ",".join(BENCHES) +
                                   ") or figure ids (--list)")
    ap.add_argument("--compare", action="store_true",
                    help="print each figure beside the one docs/performance.md records and its "
                         "target; flag those worse by more than their spread")
    ap.add_argument("--strict", action="store_true",
                    help="with --compare: exit 3 when a figure is flagged worse")
    ap.add_argument("--record", action="store_true",
                    help="write this run's figures, the date and the commit into "
                         "docs/performance.md's table (targets are kept)")
    ap.add_argument("--full", action="store_true",
                    help="with --compare or --record: every benchmark, full rounds")
    ap.add_argument("--doc", help="the document holding the recorded figures "
                                  "(default: docs/performance.md of the source)")
    ap.add_argument("--list", action="store_true", help="list the figure ids and exit")
    ap.add_argument("--pairs", type=int,
                    help="mlp_train and mlp_numpy pairs (default 9, quick 1)")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="OPENBLAS_NUM_THREADS for mlp_train and mlp_numpy (default 1)")
    ap.add_argument("--python", help="interpreter for the Python benchmarks "
                                     "(default /usr/bin/python3)")
    ap.add_argument("--yappi-clock", choices=("wall", "cpu"), default="wall",
                    help="yappi's clock in the Python call benchmark (default wall)")
    ap.add_argument("--fifo", action="store_true",
                    help="run the measured programs under chrt -f 1 (SCHED_FIFO, needs root): "
                         "on a loaded machine, no other process's time slice inside a timed call")
    args = ap.parse_args()
    if args.list:
        for fid, (bench, unit, what) in FIGURES.items():
            print(f"{fid:28s} {bench:10s} {unit:11s} {what}")
        return 0
    if args.record and args.quick and not args.doc:
        # Other sizes, other figures: quick ones go only into a copy (--doc), as the test does.
        ap.error("--record with --quick writes only into a copy given with --doc")
    if args.fifo:
        RUN_PREFIX[:] = ["chrt", "-f", "1"]
    t_start = time.perf_counter()
    try:
        cfg = Config(args)
        print(f"sonde benchmarks ({'quick' if cfg.quick else 'full'}), "
              f"{datetime.datetime.now().isoformat(timespec='seconds')}")
        print(f"machine: {machine()}")
        print(f"libsonde: {cfg.lib}\nwork dir: {cfg.work}")
        doc = args.doc or os.path.join(cfg.source, "docs", "performance.md")
        if args.compare or args.record:
            with open(doc) as f:
                figures_table.read(f.read())  # a malformed table stops the run before it starts
        summary = Summary()
        names = selected(args.only, cfg.guard)
        for name in names:
            BENCHES[name](cfg, summary)
        summary.print(cfg.quick)
        if args.only:  # figure ids name what is compared and recorded, not their neighbours
            ids = set(args.only.split(","))
            if ids & set(FIGURES):
                cfg.figures = {k: v for k, v in cfg.figures.items()
                               if k in ids or FIGURES[k][0] in ids}
        worse = compare(cfg, doc) if args.compare else []
        if args.record:
            record(cfg, doc)
    except (BenchError, figures_table.TableError, OSError) as e:
        print(f"\nbenchmark FAILED: {e}", file=sys.stderr)
        return 1
    print(f"loaded {os.getloadavg()[0]:.2f} (1-min average) on {os.cpu_count()} CPUs at the end; "
          f"(total {time.perf_counter() - t_start:.1f} s)")
    if worse and args.strict:
        print(f"worse than recorded: {', '.join(worse)}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
