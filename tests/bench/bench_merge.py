#!/usr/bin/python3
"""Targets of issue 13 for sonde merge and the rank analyses (docs/distributed.md):

  merge of 1,024 rank files of 1,000 call paths each < 60 s here, peak RSS < 200 MB;
  sonde scaling on the merged file < 2 s.

One rank's profile is written by the real library (bench_flush: 1,000 regions under 25 groups,
a BLAS call in every 10th) as rank 0 of a job; the other ranks are copies of it given their
rank, as mpirun's ranks would have. Prints every figure beside its target.

  /usr/bin/python3 tests/bench/bench_merge.py [--ranks 1024] [--paths 1000] [--build-dir build]
"""
import argparse
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def timed(cmd):
    """Runs cmd; returns (seconds, peak RSS in MiB of the command alone, stdout). The CPU time
    it took (user + sys) is kept in timed.cpu_s: on a loaded machine it is the steadier figure."""
    # /usr/bin/time reports the command's own peak, not this Python's (which a child forked
    # from it would inherit in wait4's figure).
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "maxrss_kib %M cpu_s %U %S", *cmd], capture_output=True,
                       text=True)
    t = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
    fig = [line.split() for line in p.stderr.splitlines() if line.startswith("maxrss_kib")][-1]
    timed.cpu_s = float(fig[3]) + float(fig[4])
    return t, int(fig[1]) / 1024, p.stdout


def run_of(src, dst, ranks, job):
    """A copy of the rank files src/prof.rank<r>.db for r < ranks as their own job of `ranks`
    ranks: sonde scaling refuses a file that holds fewer ranks than its run had (8d66aab), so
    the smaller runs it is held against are runs of that size, not part of the big one."""
    os.mkdir(dst)
    for r in range(ranks):
        f = os.path.join(dst, f"prof.rank{r}.db")
        shutil.copyfile(os.path.join(src, f"prof.rank{r}.db"), f)
        con = sqlite3.connect(f)
        con.execute("UPDATE processes SET world_size = ?", (ranks,))
        con.execute("UPDATE runs SET uuid = uuid || ?", (f"-{job}",))
        con.commit()
        con.close()
    return [os.path.join(dst, f"prof.rank{r}.db") for r in range(ranks)]


def make_ranks(build, work, ranks, paths):
    out = os.path.join(work, "one.db")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SONDE_") and k != "LD_PRELOAD"}
    env.update(LD_PRELOAD=os.path.join(build, "lib", "libsonde.so"), SONDE_OUTPUT=out,
               SONDE_FLUSH_INTERVAL="0", PMIX_NAMESPACE="bench-job",
               OMPI_COMM_WORLD_RANK="0", OMPI_COMM_WORLD_SIZE=str(ranks))
    subprocess.run([os.path.join(build, "tests", "bench", "bench_flush"), "--paths", str(paths),
                    "--fanout", "40", "--blas-every", "10"], env=env, check=True,
                   capture_output=True)
    one = os.path.join(work, "one.rank0.db")  # a ranked process writes its rank's file
    con = sqlite3.connect(one)
    nodes = con.execute("SELECT COUNT(*) FROM nodes").fetchone()[0]
    con.close()
    d = os.path.join(work, "ranks")
    os.mkdir(d)
    for r in range(ranks):
        f = os.path.join(d, f"prof.rank{r}.db")
        shutil.copyfile(one, f)
        # The ranks of one job share its run id (derived from PMIX_NAMESPACE); each has its rank.
        con = sqlite3.connect(f)
        con.execute("UPDATE processes SET rank = ?", (r,))
        con.commit()
        con.close()
    return d, nodes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--paths", type=int, default=1000)
    ap.add_argument("--build-dir", default=os.path.join(HERE, "..", "..", "build"))
    ap.add_argument("--work-dir", default=None)
    a = ap.parse_args()
    build = os.path.abspath(a.build_dir)
    sonde = os.path.join(build, "bin", "sonde")
    work = a.work_dir or tempfile.mkdtemp(prefix="sonde-bench-merge-")
    os.makedirs(work, exist_ok=True)
    t0 = time.perf_counter()
    d, nodes = make_ranks(build, work, a.ranks, a.paths)
    print(f"{a.ranks} rank files of {nodes} call-path nodes each "
          f"({os.path.getsize(os.path.join(d, 'prof.rank0.db')) / 1024:.0f} KiB), "
          f"made in {time.perf_counter() - t0:.1f} s")
    merged = os.path.join(work, "run.db")
    t, rss, out = timed([sonde, "merge", "-o", merged, d])
    print(out.strip())
    rate = a.ranks / t
    print(f"merge:    {t:8.2f} s  (target < 60 s: {t / 60:.2f} of it), CPU {timed.cpu_s:.1f} s  "
          f"{rate:.0f} files/s, {a.ranks * nodes / t / 1e3:.0f}k nodes/s")
    print(f"          peak RSS {rss:.0f} MiB (target < 200 MiB: {rss / 200:.2f} of it), "
          f"merged file {os.path.getsize(merged) / 2**20:.0f} MiB")
    print(f"          projected at this rate: 10k ranks {1e4 / rate:.0f} s, "
          f"100k ranks {1e5 / rate / 60:.1f} min")
    half = os.path.join(work, "half.db")
    timed([sonde, "merge", "-o", half] + run_of(d, os.path.join(work, "half"), a.ranks // 2,
                                                "half"))
    one = run_of(d, os.path.join(work, "one"), 1, "one")[0]
    t, rss, _ = timed([sonde, "scaling", half, merged, "--format", "json"])
    print(f"scaling:  {t:8.2f} s  (target < 2 s: {t / 2:.2f} of it), CPU {timed.cpu_s:.2f} s, "
          f"peak RSS {rss:.0f} MiB ({a.ranks // 2} against {a.ranks} ranks)")
    t, rss, _ = timed([sonde, "scaling", one, merged, "--format", "json"])
    print(f"scaling:  {t:8.2f} s  (target < 2 s: {t / 2:.2f} of it), CPU {timed.cpu_s:.2f} s, "
          f"peak RSS {rss:.0f} MiB (1 against {a.ranks} ranks)")
    t, rss, _ = timed([sonde, "ranks", merged, "--format", "json"])
    print(f"ranks:    {t:8.2f} s  CPU {timed.cpu_s:.2f} s, peak RSS {rss:.0f} MiB")
    t, rss, _ = timed([sonde, "report", merged, "--format", "csv"])
    print(f"report:   {t:8.2f} s  CPU {timed.cpu_s:.2f} s, peak RSS {rss:.0f} MiB (all ranks)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    if not a.work_dir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
