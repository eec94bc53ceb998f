"""Runs the device kit's checks (check.sh sets the stage), prints a table, writes summary.json,
and exits 1 when any check failed. --mode rehearse: the stub libraries stand in for the GPU, and
the checks that need PyTorch on CUDA are reported as not run."""
import argparse
import io
import json
import os
import platform
import sys
import time
import unittest
from pathlib import Path

import known_answer_check
import torch_checks
from kit_env import CLI, FAIL, NEEDS_GPU, NOT_RUN, PASS, PROGRAM, Result, run, verdict


def fixture_tests():
    """The comparison code on fixtures (test_compare.py)."""
    stream = io.StringIO()
    suite = unittest.defaultTestLoader.loadTestsFromName("test_compare")
    res = unittest.TextTestRunner(stream=stream, verbosity=0).run(suite)
    bad = [f"{t.id().rsplit('.', 1)[-1]}: {tb.strip().splitlines()[-1]}"
           for t, tb in res.failures + res.errors]
    return verdict("comparisons on fixtures", bad, {"tests": res.testsRun})


def cli_reads(out, log):
    """The installed CLI reads the profile the known-answer run wrote."""
    db = out / "known_answer.db"
    bad = []
    for cmd in (["report", db], ["tree", db], ["query", db, "SELECT COUNT(*) FROM gpu_kernels"],
                ["metrics", db, "--section", "graphs"]):
        r, _ = run([CLI, *cmd], log)
        if r.returncode != 0 or not r.stdout.strip():
            bad.append(f"sonde {cmd[0]}: exit {r.returncode} {r.stderr.strip()[-150:]}")
    return verdict("sonde CLI reads the profile", bad)


def rehearsed_overhead(out, log):
    """The pairing code, on the known-answer program and the stubs (no bound: stub timings)."""
    args = [PROGRAM, 50, 20, 3, 10]
    return torch_checks.paired_overhead(
        "overhead: known-answer program (rehearsal)", lambda i: run(args, log),
        lambda i: run([CLI, "run", "--force", "-o", out / f"overhead{i}.db", "--", *args], log), 3, None, log)


def checks(mode, out, log):
    yield from known_answer_check.check(out, log)
    yield cli_reads(out, log)
    yield fixture_tests()
    torch_names = ["torch: kernels under their frames = torch.profiler",
                   "torch: operators on CUDA = torch.profiler's counts",
                   "torch: CUDA graph replays under their capture frame",
                   "torch.distributed on NCCL, one rank: comm ops",
                   "torch.profiler inside sonde: both record",
                   "torch: breakdown in device time",
                   "overhead: torch CNN loop, profiled/plain"]
    if mode == "gpu":
        yield torch_checks.attribution(out, log)
        yield torch_checks.operators(out, log)
        yield torch_checks.graph_origins(out, log)
        yield torch_checks.nccl(out, log)
        yield torch_checks.profiler_inside(out, log)
        yield torch_checks.breakdown(out, log)
        yield cuda12()
        yield torch_checks.overhead(out, log)
    else:
        for name in torch_names:
            yield Result(name, NOT_RUN, NEEDS_GPU)
        if os.environ.get("SONDE_KIT_TORCH_PYTHON"):
            yield torch_checks.cpu_operators(out, log)
            yield torch_checks.nccl(out, log, backend="gloo")
        else:
            for name in ("torch: operators = torch.profiler's counts (rehearsal, CPU)",
                         "torch.distributed on gloo, one rank: comm ops (rehearsal, CPU)"):
                yield Result(name, NOT_RUN, "rehearsal: this python3 has no torch")
        yield rehearsed_overhead(out, log)


def cuda12():
    """CUDA 12's CUPTI on this machine (pip's nvidia-* packages, /usr/local/cuda-12*)? The kit
    has no CUDA 12 program yet: where one is found it says where, for the next kit to use."""
    import glob
    import site
    roots = site.getsitepackages() + ["/usr/local", "/opt"]
    found = sorted({f for r in roots for f in glob.glob(r + "/**/libcupti.so.12*", recursive=True)})
    where = f"found {found[:3]}" if found else "no libcupti.so.12 on this machine"
    return Result("CUDA 12: CUPTI 12 records", NOT_RUN, where, {"found": found[:10]})


def table(results):
    width = max(len(r.name) for r in results)
    lines = [f"{'check':<{width}}  result   detail", "-" * (width + 40)]
    for r in results:
        detail = r.detail or ", ".join(f"{k} {v}" for k, v in r.figures.items())
        if r.status == FAIL and r.expected_fail:
            detail = f"(expected today: {r.expected_fail}) {detail}"
        lines.append(f"{r.name:<{width}}  {r.status:<7}  {detail}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["gpu", "rehearse"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    log = args.out / "checks.log"
    started = time.time()
    results = []
    for r in checks(args.mode, args.out, log):
        results.append(r)
        print(f"check.sh: {r.status:<7} {r.name}", file=sys.stderr, flush=True)
    text = table(results)
    print(text)
    (args.out / "table.txt").write_text(text + "\n")
    summary = {"mode": args.mode, "host": platform.node(), "python": platform.python_version(),
               "seconds": round(time.time() - started, 1),
               "failed": sum(r.status == FAIL for r in results),
               "checks": [r.__dict__ for r in results]}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print(f"{summary['failed']} failed, {sum(r.status == PASS for r in results)} passed, "
          f"{sum(r.status == NOT_RUN for r in results)} not run, in {summary['seconds']} s; "
          f"summary: {args.out / 'summary.json'}")
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
