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
import traceback
import unittest
from pathlib import Path

import kit_env
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


KNOWN_ANSWER = ["known-answer: counts and call paths",
                "known-answer: graph replays under their capture path",
                "known-answer: kernel times vs events"]
TORCH_CPU = ["torch: operators = torch.profiler's counts (rehearsal, CPU)",
             "torch.distributed on gloo, one rank: comm ops (rehearsal, CPU)",
             "torch: CPU math under sonde = plain, BLAS seen"]


def guarded(names, fn, *args, **kwargs):
    """The results of fn (one Result or a list), or a FAIL for each of `names` when the check's
    own code raised: a GPU run is too dear to lose the checks after a bug in one of them."""
    try:
        r = fn(*args, **kwargs)
        return r if isinstance(r, list) else [r]
    except Exception:  # noqa: BLE001 -- any bug of a check is that check's failure
        last = traceback.format_exc().strip().splitlines()
        why = f"the check raised: {' | '.join(last[-3:])[-400:]}"
        return [Result(n, FAIL, why, {"traceback": last[-30:]}) for n in names]


def checks(mode, out, log):
    if os.path.exists(PROGRAM):
        yield from guarded(KNOWN_ANSWER, known_answer_check.check, out, log)
        yield from guarded(["sonde CLI reads the profile"], cli_reads, out, log)
    else:
        for name in KNOWN_ANSWER + ["sonde CLI reads the profile"]:
            yield Result(name, NOT_RUN, "the known-answer program did not build (build.log)")
    yield from guarded(["comparisons on fixtures"], fixture_tests)
    gpu = [("torch: kernels under their frames = torch.profiler", torch_checks.attribution),
           ("torch: operators on CUDA = torch.profiler's counts", torch_checks.operators),
           ("torch: CUDA graph replays under their capture frame", torch_checks.graph_origins),
           ("torch.distributed on NCCL, one rank: comm ops", torch_checks.nccl),
           ("torch.profiler inside sonde: both record", torch_checks.profiler_inside),
           ("torch.profiler inside sonde, TEARDOWN_CUPTI=1: both record",
            lambda out, log: torch_checks.profiler_inside(out, log, teardown=True)),
           ("torch: breakdown in device time", torch_checks.breakdown),
           ("torch: CPU math under sonde = plain, BLAS seen", torch_checks.cpu_math),
           ("CUDA 12: CUPTI 12 records", lambda out, log: cuda12()),
           ("overhead: torch CNN loop, profiled/plain", torch_checks.overhead)]
    if mode == "gpu":
        for name, fn in gpu:
            if kit_env.time_left() < 20:
                yield Result(name, NOT_RUN, "the kit's --budget was spent before it")
                continue
            yield from guarded([name], fn, out, log)
    else:
        for name, _ in gpu:
            yield Result(name, NOT_RUN, NEEDS_GPU)
        if os.environ.get("SONDE_KIT_TORCH_PYTHON"):
            yield from guarded(TORCH_CPU[:1], torch_checks.cpu_operators, out, log)
            yield from guarded(TORCH_CPU[1:2], torch_checks.nccl, out, log, backend="gloo")
            yield from guarded(TORCH_CPU[2:], torch_checks.cpu_math, out, log)
        else:
            for name in TORCH_CPU:
                yield Result(name, NOT_RUN, "rehearsal: this python3 has no torch")
        yield from guarded(["overhead: known-answer program (rehearsal)"], rehearsed_overhead,
                           out, log)


def cuda12():
    """CUDA 12's CUPTI on this machine (pip's nvidia-* packages, /usr/local/cuda-12*)? The kit
    has no CUDA 12 program yet: where one is found it says where, for the next kit to use."""
    import glob
    import site
    patterns = [d + "/nvidia/*/lib/libcupti.so.12*" for d in site.getsitepackages()]
    patterns += ["/usr/local/cuda*/extras/CUPTI/lib64/libcupti.so.12*",
                 "/usr/local/cuda*/lib64/libcupti.so.12*",
                 "/usr/local/cuda*/targets/*/lib/libcupti.so.12*"]
    found = sorted({f for pat in patterns for f in glob.glob(pat)})
    where = f"found {found[:3]}" if found else "no libcupti.so.12 on this machine"
    return Result("CUDA 12: CUPTI 12 records", NOT_RUN, where, {"found": found[:10]})


def table(results):
    width = max(len(r.name) for r in results)
    lines = [f"{'check':<{width}}  result   detail", "-" * (width + 40)]
    for r in results:
        detail = r.detail or ", ".join(f"{k} {v}" for k, v in r.figures.items())
        if r.status == FAIL and r.expected_fail:
            detail = f"(expected today: {r.expected_fail}) {detail}"
        detail = " | ".join(x.strip() for x in detail.splitlines() if x.strip())
        lines.append(f"{r.name:<{width}}  {r.status:<7}  {detail}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["gpu", "rehearse"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget", type=float, help="seconds: checks not started by then are not "
                    "run, and no command runs past it")
    args = ap.parse_args()
    log = args.out / "checks.log"
    started = time.time()
    if args.budget:
        kit_env.DEADLINE = started + args.budget
    results = []

    def write():  # after every check: a run killed at its limit still leaves what it found
        summary = {"mode": args.mode, "host": platform.node(),
                   "python": platform.python_version(),
                   "seconds": round(time.time() - started, 1),
                   "failed": sum(r.status == FAIL for r in results),
                   "checks": [r.__dict__ for r in results]}
        (args.out / "table.txt").write_text(table(results) + "\n")
        (args.out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        return summary

    for r in checks(args.mode, args.out, log):
        results.append(r)
        print(f"check.sh: {r.status:<7} {r.name}", file=sys.stderr, flush=True)
        write()
    summary = write()
    print(table(results))
    print(f"{summary['failed']} failed, {sum(r.status == PASS for r in results)} passed, "
          f"{sum(r.status == NOT_RUN for r in results)} not run, in {summary['seconds']} s; "
          f"summary: {args.out / 'summary.json'}")
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
