#!/usr/bin/python3
"""The sampler against perf (issue 16's target): on ONE run, `perf record -e cpu-clock` wrapped
around `sonde run --sample HZ`, the share of the top native functions in each, side by side;
then the sampler's overhead at HZ in alternating pairs (CPU time of the child, with and without
--sample; wall time varies too much on a shared machine).

  /usr/bin/python3 tests/bench/bench_sampler_perf.py --workload mlp_train --steps 30
  /usr/bin/python3 tests/bench/bench_sampler_perf.py --workload torch_cnn --steps 10 --pairs 4
  ... --pairs 6 --against /tmp/base/libsonde.so   (a third run per pair: another libsonde.so,
                                                   sampling too: before and after in one run)

Shares are of user-mode CPU time on both sides: the sampler's clock counts user time only
(its signal never interrupts a system call), so perf's kernel samples are left out of its
denominator (its share of all samples is printed too). A function is matched by its name
without parameters; the Python interpreter (python3*/libpython*) is one row on both sides:
under a Python frame the sampler drops the interpreter's frames, so the frame's own
evaluation is a sample with no native frame there.
"""

import argparse
import os
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SONDE_SOURCE", os.path.dirname(os.path.dirname(HERE)))
BUILD = os.environ.get("SONDE_BUILD", os.path.join(SOURCE, "build"))
CLI = os.environ.get("SONDE_CLI", os.path.join(BUILD, "bin", "sonde"))
PY = "/usr/bin/python3"
INTERPRETER = "(python interpreter)"
SONDE = "(sonde)"


def workload(name, steps):
    if name == "mlp_train":
        return [os.path.join(BUILD, "examples", "mlp_train"), "--steps", str(steps)]
    return [PY, os.path.join(SOURCE, "examples", "torch_cnn", "train.py"), "--steps", str(steps),
            "--eval-every", "0"]


def without_parameters(name):
    if not name.endswith(")") and not name.endswith(") const"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        if name[i] == ")":
            depth += 1
        elif name[i] == "(":
            depth -= 1
            if depth == 0:
                return name[:i]
    return name


def same_object(key):
    """libtorch_cpu.so.1.13+0x10 and libtorch_cpu.so.1.13.0+0x10 (soname and file) are one."""
    return re.sub(r"^([^+ ]*?\.so)[.\d]*\+", r"\1+", key)


def bucket(obj):
    if re.match(r"(python3|libpython3)", obj):
        return INTERPRETER
    if obj.startswith("libsonde") or obj.startswith("_sonde"):
        return SONDE
    return None


def sonde_shares(db):
    """function -> samples, from the sampled_paths view (its leaf: the innermost frame)."""
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT s.leaf, r.kind, SUM(s.count) FROM sampled_paths s JOIN nodes n USING (node_id) "
        "JOIN routines r USING (routine_id) GROUP BY s.leaf, r.kind").fetchall()
    con.close()
    out = {}
    for leaf, kind, n in rows:
        if leaf == "":
            # No native frame below the node: a Python frame's own evaluation, else sonde's own
            # code (a wrapper's, or a signal that waited for sonde's code to unblock it).
            key = INTERPRETER if kind == "python" else SONDE
        else:
            m = re.match(r"^(.*) \[([^\]]+)\]$", leaf)
            name, obj = (m.group(1), m.group(2)) if m else (leaf, leaf.split("+")[0])
            key = bucket(obj) or same_object(without_parameters(name))
        out[key] = out.get(key, 0) + n
    return out


def perf_shares(data):
    """(user function -> samples, kernel samples)."""
    text = subprocess.run(
        ["perf", "report", "-i", data, "--stdio", "--no-children", "-s", "dso,sym", "-n", "-q",
         "-t", "\t"], capture_output=True, text=True, check=True).stdout
    out, kernel = {}, 0
    for line in text.splitlines():
        fields = [f.strip() for f in line.split("\t")]
        if len(fields) < 4:
            continue
        n, dso, sym = int(fields[1]), fields[2], fields[3]
        if sym.startswith("[k]") or dso.startswith("[kernel"):
            kernel += n
            continue
        name = sym[4:] if sym.startswith("[.] ") else sym
        if re.fullmatch(r"0x[0-9a-f]+", name):  # no symbol: the address in its object, as sonde's
            name = f"{dso}+{int(name, 16):#x}"
        key = bucket(dso) or same_object(without_parameters(name))
        out[key] = out.get(key, 0) + n
    return out, kernel


def compare(args, tmp):
    db, data = os.path.join(tmp, "run.db"), os.path.join(tmp, "perf.data")
    period_ns = int(1e9 / args.hz)
    cmd = ["perf", "record", "-e", "cpu-clock", "-c", str(period_ns), "-o", data, "-q", "--",
           CLI, "run", "--sample", str(args.hz), "-o", db, "--", *workload(args.workload,
                                                                            args.steps)]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"the run failed ({r.returncode}): {r.stderr[-500:]}")
    s = sonde_shares(db)
    p, kernel = perf_shares(data)
    s_total, p_user = sum(s.values()), sum(p.values())
    p_all = p_user + kernel
    named = [k for k in sorted(p, key=p.get, reverse=True) if k not in (INTERPRETER, SONDE)]
    top = named[:args.top]
    print(f"{args.workload} --steps {args.steps}, {args.hz} Hz: sonde {s_total} samples, perf "
          f"{p_all} ({kernel} in the kernel, {100 * kernel / max(p_all, 1):.1f} %)")
    print("| function | sonde % | perf % of user | difference (points) | perf % of all |")
    print("| --- | --- | --- | --- | --- |")
    worst = 0.0
    for key in top + [k for k in (INTERPRETER, SONDE) if k in p or k in s]:
        a = 100 * s.get(key, 0) / max(s_total, 1)
        b = 100 * p.get(key, 0) / max(p_user, 1)
        c = 100 * p.get(key, 0) / max(p_all, 1)
        if key in top:
            worst = max(worst, abs(a - b))
        print(f"| {key} | {a:.1f} | {b:.1f} | {a - b:+.1f} | {c:.1f} |")
    print(f"largest difference over the top {len(top)}: {worst:.1f} points "
          f"(target: within 5)")
    return worst


def cpu_of(cmd, env=None):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"the run failed ({r.returncode}): {r.stderr[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def overhead(args, tmp):
    runs = [("without", [], None), ("with", ["--sample", str(args.hz)], None)]
    if args.against:
        runs.append(("with " + os.path.basename(os.path.dirname(args.against) or "."),
                     ["--sample", str(args.hz)], args.against))
    cpu = {name: [] for name, _, _ in runs}
    for i in range(args.pairs):
        order = runs if i % 2 == 0 else runs[::-1]  # alternate which goes first
        for name, extra, library in order:
            db = os.path.join(tmp, f"o{i}{len(cpu[name])}{name.replace(' ', '_')}.db")
            env = dict(os.environ)
            if library:
                env["SONDE_LIBRARY"] = library
            c, _ = cpu_of([CLI, "run", *extra, "-o", db, "--", *workload(args.workload,
                                                                          args.steps)], env)
            cpu[name].append(c)
    print(f"\noverhead at {args.hz} Hz, {args.workload} --steps {args.steps}, {args.pairs} "
          f"alternating pairs, CPU s of the child (user + system)")
    print("| pair | " + " | ".join(str(i) for i in range(args.pairs)) + " |")
    print("| --- |" + " --- |" * args.pairs)
    for name, _, _ in runs:
        print(f"| {name} | " + " | ".join(f"{x:.3f}" for x in cpu[name]) + " |")
    for name, _, library in runs[1:]:
        ratios = [b / a for a, b in zip(cpu["without"], cpu[name])]
        print(f"{name}: median ratio {statistics.median(ratios):.3f}, mean "
              f"{statistics.mean(ratios):.3f} (target < 1.02)"
              + (f" [{library}]" if library else ""))
    print(f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs at the end")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("mlp_train", "torch_cnn"), default="mlp_train")
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--hz", type=int, default=1000)
    ap.add_argument("--top", type=int, default=5)
    ap.add_argument("--pairs", type=int, default=0, help="overhead pairs (0: none)")
    ap.add_argument("--against", metavar="LIB",
                    help="another libsonde.so (an older build) sampled in each pair too")
    ap.add_argument("--no-compare", action="store_true", help="the overhead pairs only")
    args = ap.parse_args()
    if shutil.which("perf") is None:
        sys.exit("perf is not installed")
    tmp = tempfile.mkdtemp(prefix="sonde-bench-sampler-")
    try:
        if not args.no_compare:
            compare(args, tmp)
        if args.pairs:
            overhead(args, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
