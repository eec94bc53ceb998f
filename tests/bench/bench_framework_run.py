#!/usr/bin/python3
"""Issue 16's framework-style target: a call-heavy PyTorch training run of about 3 s, under
`python3 -m sonde` against plain and against `python3 -m cProfile`, in the same rounds:

  whole run (wall, from outside)       sonde < 5 % over plain
  training loop (the program's timer)  sonde < 3 % over plain

The workload is the repository's torch CNN with small batches (examples/torch_cnn/train.py
--batch 8 --steps 200: many small operators per second, so the Python frames and the oneDNN and
BLAS calls are many), which prints its loop's own time (`time_s`). Each round runs plain, sonde,
sonde --in-process and cProfile once, in an order that rotates from round to round; the ratios are taken within a
round and their medians printed, with the CPU time (user + system, RUSAGE_CHILDREN) beside the
wall time. Every run's loss and accuracy lines must be the same. `no-ops` is sonde with
SONDE_TORCH_OPS=0: sonde's ratio to it is what recording torch's operators costs (docs/torch.md).

  /usr/bin/python3 tests/bench/bench_framework_run.py [--build-dir build] [--rounds 7]
        [--steps 200] [--batch 8]
"""
import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"


def run(cmd, env, cwd):
    """(wall s, CPU s, the loop's own time_s, the result lines)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    m = re.search(r"^time_s ([0-9.]+)$", p.stderr, re.M)  # the program prints it on stderr
    if not m:
        sys.exit(f"{' '.join(cmd)} printed no time_s line")
    result = p.stdout.splitlines()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, float(m.group(1)), result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    script = os.path.join(SOURCE, "examples", "torch_cnn", "train.py")
    prog = [script, "--steps", str(args.steps), "--batch", str(args.batch)]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SONDE_") and k != "LD_PRELOAD"}
    env["PYTHONPATH"] = os.path.join(os.path.abspath(args.build_dir), "python")
    with tempfile.TemporaryDirectory() as tmp:
        variants = {
            "plain": [PY] + prog,
            "sonde": [PY, "-m", "sonde", "-o", os.path.join(tmp, "p.db"), "--force"] + prog,
            "in-proc": [PY, "-m", "sonde", "--in-process", "-o", os.path.join(tmp, "q.db"),
                        "--force"] + prog,
            "no-ops": [PY, "-m", "sonde", "-o", os.path.join(tmp, "r.db"), "--force"] + prog,
            "cProfile": [PY, "-m", "cProfile", "-o", os.path.join(tmp, "c.prof")] + prog,
        }
        names = list(variants)
        runs = {n: [] for n in names}
        expected = None
        for i in range(args.rounds):
            for n in names[i % len(names):] + names[:i % len(names)]:
                wall, cpu, loop, result = run(
                    variants[n], dict(env, SONDE_TORCH_OPS="0") if n == "no-ops" else env, tmp)
                if expected is None:
                    expected = result
                elif result != expected:
                    sys.exit(f"{n} changed the program's results:\n{result}\nagainst\n{expected}")
                runs[n].append((wall, cpu, loop))
            print(f"  round {i}: " + ", ".join(
                f"{n} wall {runs[n][-1][0]:.3f} s loop {runs[n][-1][2]:.3f} s" for n in names))
    print(f"torch_cnn --steps {args.steps} --batch {args.batch}, {args.rounds} rounds; "
          f"plain median wall {statistics.median(w for w, _, _ in runs['plain']):.3f} s, "
          f"loop {statistics.median(l for _, _, l in runs['plain']):.3f} s")
    targets = {"wall": 1.05, "loop": 1.03}
    for n in ("sonde", "in-proc", "cProfile"):
        for k, label in enumerate(("wall", "cpu", "loop")):
            ratios = [runs[n][i][k] / runs["plain"][i][k] for i in range(args.rounds)]
            line = (f"{n:8} {label:4} ratio to plain: median {statistics.median(ratios):.3f} "
                    f"(range {min(ratios):.3f}-{max(ratios):.3f})")
            if n in ("sonde", "in-proc") and label in targets:
                met = statistics.median(ratios) < targets[label]
                line += f" (target < {targets[label]:.2f}: {'met' if met else 'NOT met'})"
            print(line)
    for k, label in enumerate(("wall", "cpu", "loop")):
        ratios = [runs["sonde"][i][k] / runs["no-ops"][i][k] for i in range(args.rounds)]
        print(f"torch ops {label:4} ratio sonde / SONDE_TORCH_OPS=0: median "
              f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
