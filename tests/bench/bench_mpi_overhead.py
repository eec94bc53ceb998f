#!/usr/bin/python3
"""Issue 13's per-rank overhead target: < 2 % on the MPI MLP, paired runs.

mpirun -np 2 mlp_train_mpi, alternately without and with sonde (sonde run, one profile per rank),
OPENBLAS_NUM_THREADS=1 so the two ranks fit the two cores. Each run's figure is the CPU time
(user + sys) of everything mpirun started, from getrusage(RUSAGE_CHILDREN) around it: on this
shared, loaded machine wall time swings by tens of percent between identical runs, while CPU time
moves by a few. mpirun's own CPU time is in both sides of a pair. Wall time is printed beside it.
Every run's output (loss and accuracy lines) must be the same with and without sonde.

  /usr/bin/python3 tests/bench/bench_mpi_overhead.py [--pairs 8] [--steps 30] [--batch 100]
                                                    [--build-dir build]
"""
import argparse
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env):
    """Returns (wall s, CPU s of the children, stdout)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, p.stdout


def results(stdout):
    """The lines that carry the numbers the run computes (not its timing)."""
    return [line for line in stdout.splitlines() if "loss" in line or "acc" in line]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=100, help="global batch (mlp_train's --batch)")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--build-dir", default=os.path.join(HERE, "..", "..", "build"))
    a = ap.parse_args()
    build = os.path.abspath(a.build_dir)
    mpirun = shutil.which("mpirun")
    prog = os.path.join(build, "examples", "mlp_train_mpi")
    if mpirun is None or not os.path.exists(prog):
        sys.exit("needs mpirun and mlp_train_mpi (sonde built with MPI headers)")
    work = tempfile.mkdtemp(prefix="sonde-bench-mpi-")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SONDE_") and k != "LD_PRELOAD"}
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               SONDE_LIBRARY=os.path.join(build, "lib", "libsonde.so"))
    launch = [mpirun, "--oversubscribe", "--allow-run-as-root", "-np", str(a.np)]
    args = [prog, "--steps", str(a.steps), "--batch", str(a.batch), "--eval-every", "10"]
    sonde = os.path.join(build, "bin", "sonde")
    print(f"mpirun -np {a.np} mlp_train_mpi --steps {a.steps} --batch {a.batch}, "
          f"OPENBLAS_NUM_THREADS=1, "
          f"{a.pairs} alternating pairs; CPU time of mpirun's children (user+sys)")
    ratios, wall_ratios, base_cpu, prof_cpu = [], [], [], []
    reference = None
    for i in range(a.pairs):
        order = ["base", "sonde"] if i % 2 == 0 else ["sonde", "base"]
        got = {}
        for which in order:
            if which == "sonde":
                d = os.path.join(work, f"pair{i}")
                os.mkdir(d)
                cmd = launch + [sonde, "run", "-o", os.path.join(d, "prof.db"), "--"] + args
            else:
                cmd = launch + args
            wall, cpu, out = run(cmd, env)
            lines = results(out)
            reference = reference or lines
            if lines != reference:
                sys.exit(f"output changed ({which}, pair {i}):\n{lines}\nagainst\n{reference}")
            got[which] = (wall, cpu)
        d = os.path.join(work, f"pair{i}")
        for r in range(a.np):
            con = sqlite3.connect(os.path.join(d, f"prof.rank{r}.db"))
            n = con.execute("SELECT SUM(calls) FROM comm_ops WHERE op = 'MPI_Allreduce'").fetchone()
            con.close()
            if not n[0]:
                sys.exit(f"rank {r}'s profile of pair {i} has no MPI_Allreduce")
        base_cpu.append(got["base"][1])
        prof_cpu.append(got["sonde"][1])
        ratios.append(got["sonde"][1] / got["base"][1])
        wall_ratios.append(got["sonde"][0] / got["base"][0])
        print(f"  pair {i}: CPU {got['base'][1]:.3f} s without, {got['sonde'][1]:.3f} s with "
              f"(ratio {ratios[-1]:.3f}); wall {got['base'][0]:.2f} / {got['sonde'][0]:.2f} s "
              f"(ratio {wall_ratios[-1]:.3f})", flush=True)
    med = statistics.median(ratios)
    print(f"CPU-time ratio with/without: median {med:.3f}, mean {statistics.mean(ratios):.3f}, "
          f"range {min(ratios):.3f}-{max(ratios):.3f} (target < 1.02: "
          f"{'met' if med < 1.02 else 'not met'})")
    print(f"wall-time ratio: median {statistics.median(wall_ratios):.3f}, range "
          f"{min(wall_ratios):.3f}-{max(wall_ratios):.3f}")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
