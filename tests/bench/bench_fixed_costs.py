#!/usr/bin/python3
"""Fixed costs of `python3 -m sonde` (issue 16 item 1; docs/performance.md "Fixed costs"):

  python3 -m sonde on an empty script   <= 1.3x plain /usr/bin/python3
  import torch under python3 -m sonde   <= 1.05x plain
  import numpy                          (reported beside them)
  the exit flush of ~99k call paths     well under 100 ms

Each case runs plain and under sonde in alternating pairs (which goes first alternates); the
figures are medians of the pairs, wall time and the CPU time (user + system) of the child and
everything it waited for (getrusage RUSAGE_CHILDREN): on a shared, loaded machine the CPU time
is the steadier of the two. The ratios are taken within each pair. For the empty script, the
launcher's parts are timed too, so where the time goes is printed beside the total: the
launcher's own interpreter, libsonde preloaded with no hook, and the whole (the default
in-process launch: libsonde loaded into the launcher's own interpreter); and the re-exec launch
(--re-exec: the program started again in a second interpreter under sonde run).
sonde's Python modules are byte-compiled first, as an installed package's are (a machine with
PYTHONDONTWRITEBYTECODE=1 would otherwise compile them in every run).

The flush is bench_flush's (a program under libsonde making N distinct call paths, 100 groups
of N/100 regions, then timing sonde_flush() twice): the first flush inserts every row, the
second, with nothing new, shows the flush is proportional to what changed. Beside it, in the
same rounds, bench_sqlite_floor writes the same rows into a fresh profile's `nodes` table with
SQLite alone (64 to a statement, one transaction): the floor the first flush is held against.

  /usr/bin/python3 tests/bench/bench_fixed_costs.py [--build-dir build] [--pairs 9]
        [--only empty,numpy,torch,flush] [--python /usr/bin/python3]
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def timed(cmd, env, cwd):
    """(wall s, CPU s of the children) of one run; exits on a failure."""
    # libsonde never overwrites a profile (SONDE_OUTPUT beside it instead): each run a new one.
    for name in ("pre.db", "prof.db"):
        if os.path.exists(os.path.join(cwd, name)):
            os.unlink(os.path.join(cwd, name))
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0 and not (p.returncode == 2 and b"cannot open script" in p.stderr):
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr.decode(errors='replace')}")
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def paired(variants, pairs, cwd):
    """variants: {name: (cmd, env)}, the first the reference. Runs them in rotation `pairs`
    times; returns {name: [(wall, cpu), ...]}."""
    names = list(variants)
    out = {n: [] for n in names}
    for i in range(pairs):
        order = names if i % 2 == 0 else names[::-1]
        for n in order:
            out[n].append(timed(*variants[n], cwd))
    return out


def report(title, results, target=None):
    names = list(results)
    ref = names[0]
    print(f"\n== {title}")
    for n in names:
        w = statistics.median(x[0] for x in results[n])
        c = statistics.median(x[1] for x in results[n])
        line = f"  {n:28s} wall {w * 1000:8.1f} ms   CPU {c * 1000:8.1f} ms"
        if n != ref:
            rw = statistics.median(a[0] / b[0] for a, b in zip(results[n], results[ref]))
            rc = statistics.median(a[1] / b[1] for a, b in zip(results[n], results[ref]))
            line += f"   x{rw:.2f} wall, x{rc:.2f} CPU (median of per-pair ratios)"
        print(line)
    if target:
        print(f"  target: {target}")
    sys.stdout.flush()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(here, "..", "..", "build"))
    ap.add_argument("--pairs", type=int, default=9)
    ap.add_argument("--only", default="empty,numpy,torch,flush")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--paths", type=int, default=99000, help="call paths of the flush case")
    a = ap.parse_args()
    build = os.path.abspath(a.build_dir)
    lib = os.path.join(build, "lib", "libsonde.so")
    only = set(a.only.split(","))
    work = tempfile.mkdtemp(prefix="sonde-fixed-")
    for name, body in (("empty.py", ""), ("numpy_import.py", "import numpy\n"),
                       ("torch_import.py", "import torch\n")):
        with open(os.path.join(work, name), "w") as f:
            f.write(body)
    base = {k: v for k, v in os.environ.items() if not k.startswith("SONDE_")
            and k not in ("LD_PRELOAD", "PYTHONPATH")}
    base["OPENBLAS_NUM_THREADS"] = "1"
    under = dict(base, PYTHONPATH=os.path.join(build, "python"))
    py = a.python

    def sonde(script, *flags):
        return ([py, "-m", "sonde", *flags, "-o", "prof.db", script], under)

    subprocess.run([py, "-m", "compileall", "-q", os.path.join(build, "python", "sonde")],
                   check=True)

    if "empty" in only:
        preload = dict(base, LD_PRELOAD=lib, SONDE_OUTPUT=os.path.join(work, "pre.db"))
        # The launcher up to its exec: a script that is not there stops it just before.
        launcher = ([py, "-m", "sonde", "--re-exec", "-o", "prof.db", "missing.py"], under)
        report("python3 -m sonde on an empty script", paired({
            "plain python3 empty.py": ([py, "empty.py"], base),
            "launcher alone (to its exec)": launcher,
            "libsonde preloaded, no hook": ([py, "empty.py"], preload),
            "python3 -m sonde empty.py": sonde("empty.py"),
            "... --re-exec empty.py": sonde("empty.py", "--re-exec"),
        }, a.pairs, work), "python3 -m sonde at most 1.3x plain")
    for case, script, target in (("numpy", "numpy_import.py", None),
                                 ("torch", "torch_import.py", "at most 1.05x plain")):
        if case in only:
            report(f"import {case}", paired({
                f"plain python3 {script}": ([py, script], base),
                f"python3 -m sonde {script}": sonde(script),
                f"... --re-exec {script}": sonde(script, "--re-exec"),
            }, max(3, a.pairs // 2) if case == "torch" else a.pairs, work), target)
    if "flush" in only:
        bench = os.path.join(build, "tests", "bench", "bench_flush")
        floor_bench = os.path.join(build, "tests", "bench", "bench_sqlite_floor")
        first, second, first_cpu, second_cpu, faults = [], [], [], [], []
        floor_cpu, ratios = [], []
        shape = ["--paths", str(a.paths), "--fanout", str(a.paths // 100)]
        for _ in range(max(3, a.pairs // 3)):
            db = os.path.join(work, "flush.db")
            for suffix in ("", "-journal"):
                if os.path.exists(db + suffix):
                    os.unlink(db + suffix)
            env = dict(base, LD_PRELOAD=lib, SONDE_OUTPUT=db, SONDE_FLUSH_INTERVAL="0")
            out = subprocess.run([bench] + shape,
                                 env=env, capture_output=True, text=True, check=True).stdout
            vals = dict(line.split(None, 1) for line in out.splitlines() if " " in line)
            # The floor: a fresh profile of sonde's (a process that measured nothing), then the
            # same rows written into it with SQLite alone.
            os.unlink(db)
            subprocess.run(["/bin/true"], env=dict(base, LD_PRELOAD=lib, SONDE_OUTPUT=db),
                           check=True)
            floor = subprocess.run([floor_bench, db] + shape, env=base, capture_output=True,
                                   text=True, check=True).stdout
            floor_vals = dict(line.split(None, 1) for line in floor.splitlines() if " " in line)
            floor_cpu.append(float(floor_vals["insert_cpu_s"]))
            ratios.append(float(vals["flush1_cpu_s"]) / floor_cpu[-1])
            first.append(float(vals["flush1_s"]))
            second.append(float(vals["flush2_s"]))
            first_cpu.append(float(vals["flush1_cpu_s"]))
            second_cpu.append(float(vals["flush2_cpu_s"]))
            faults.append((int(vals["flush1_faults"]), int(vals["flush2_faults"])))
        print(f"\n== sonde_flush() of {a.paths:,} new call paths (bench_flush, 100 groups)")
        print(f"  first flush (inserts)        {statistics.median(first) * 1000:8.1f} ms "
              f"(runs {min(first) * 1000:.0f}-{max(first) * 1000:.0f})")
        print(f"  second flush, nothing new    {statistics.median(second) * 1000:8.1f} ms "
              f"(runs {min(second) * 1000:.0f}-{max(second) * 1000:.0f})")
        # CPU time of the flushing thread: on a loaded machine, what the flush itself costs.
        print(f"  first flush, CPU time        {statistics.median(first_cpu) * 1000:8.1f} ms "
              f"(runs {min(first_cpu) * 1000:.0f}-{max(first_cpu) * 1000:.0f})")
        print(f"  nothing new, CPU time        {statistics.median(second_cpu) * 1000:8.1f} ms")
        print(f"  SQLite alone, same rows, CPU {statistics.median(floor_cpu) * 1000:8.1f} ms "
              f"(runs {min(floor_cpu) * 1000:.0f}-{max(floor_cpu) * 1000:.0f}); first flush "
              f"x{statistics.median(ratios):.2f} of it (median of per-round ratios)")
        print(f"  page faults (minor)          {statistics.median(f for f, _ in faults):8.0f} first, "
              f"{statistics.median(s for _, s in faults):.0f} nothing new")
        print("  target: the exit flush of ~99k paths well under 100 ms")
    print(f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
