"""The PyTorch checks of the device kit (torch_steps.py on CUDA): kernels beneath the Python frames
that launched them and in the numbers torch.profiler records; torch.profiler started and stopped
inside a run under sonde; the overhead of profiling the training loop."""
import json
from collections import Counter

import compare
from kit_env import (CLI, KIT, NOT_RUN, TORCH_PYTHON, Result, autograd_kernel_rows,
                     graph_origin_rows, kernel_rows, operator_rows, python_under_sonde, query,
                     run, verdict)

STEPS = 5
STEP_FRAMES = ["cnn_step", "transformer_step", "compiled_step", "graph_step"]
SCRIPT = str(KIT / "torch_steps.py")
OVERHEAD_PAIRS, OVERHEAD_STEPS = 3, 200
# A gross-regression bound for the overhead check, not the design target (1.05): the CNN loop is
# launch-bound, where CUPTI alone cost 1.3-1.7x on an H200 (docs/gpu.md, step 5).
OVERHEAD_BOUND = 2.0


def window(kernels, scope="run_steps",
           exclude=("profiled", "after_profiler_steps", "settle_after_profiler")):
    """Kernel names sonde recorded beneath `scope`'s frame (and not beneath `exclude`'s)."""
    inside = compare.frame_pattern(scope)
    out = [compare.frame_pattern(x) for x in exclude]
    return Counter(n for n, p, _, _ in kernels
                   if p and inside.search(p) and not any(x.search(p) for x in out))


def compared(db):
    """The kernels of the compared window: beneath run_steps, and every one PyTorch's autograd
    device thread launched (the window's backward; torch_steps.py warms up on its own thread)."""
    return window(kernel_rows(db)) + Counter(n for n, _ in autograd_kernel_rows(db))


# The environment of every later torch run once the first one under sonde failed with the
# operators on and ran without them: the GPU checks still say what they can.
FALLBACK = {}


# Why torch_steps.py cannot run here at all (its plain run under torch.profiler failed, e.g.
# Triton without a C compiler or Python.h): the checks that run it are then NOT RUN, not
# failures of sonde's.
BROKEN = []


def not_run_if_broken(name):
    return Result(name, NOT_RUN, f"torch_steps.py fails without sonde: {BROKEN[0]}") \
        if BROKEN else None


def attribution(out, log):
    """Every kernel beneath its step's frame; names and counts as torch.profiler's."""
    name = "torch: kernels under their frames = torch.profiler"
    db, trace = out / "torch.db", out / "torch_trace.json"
    # Without sonde first: a failure there is the machine's, and says so.
    p, _ = run([TORCH_PYTHON, SCRIPT, "--steps", STEPS, "--profiler", trace], log)
    if p.returncode != 0:
        BROKEN.append(f"exit {p.returncode}: {p.stderr.strip()[-300:]}")
        return not_run_if_broken(name)
    r, _ = python_under_sonde([SCRIPT, "--steps", STEPS], db, log)
    first = []
    if r.returncode != 0:
        first = [f"under sonde: exit {r.returncode}: {r.stderr.strip()[-300:]}"]
        r, _ = python_under_sonde([SCRIPT, "--steps", STEPS], db, log, SONDE_TORCH_OPS=0)
        if r.returncode != 0:
            return verdict(name, first + [f"and with SONDE_TORCH_OPS=0: exit {r.returncode}"])
        FALLBACK["SONDE_TORCH_OPS"] = 0
        first.append("with SONDE_TORCH_OPS=0 it ran: this check and the later ones ran so")
    kernels = kernel_rows(db)
    failures = first + [f"{k} under {path}" for k, path in
                        compare.misattributed([(k, path) for k, path, _, _ in kernels],
                                              "run_steps", STEP_FRAMES)]
    ours = compared(db)
    backward = autograd_kernel_rows(db)
    if not backward:
        failures.append("no kernel launched by a pt_autograd_N thread (the CNN's backward)")
    for frame in STEP_FRAMES:  # each kind of step launched something
        pat = compare.frame_pattern(frame)
        if not any(p and pat.search(p) for _, p, _, _ in kernels):
            failures.append(f"no kernel beneath {frame}")
    theirs = compare.trace_kernel_counts(trace)
    failures += [f"{k[:80]}: sonde {a}, torch.profiler {b}"
                 for k, a, b in compare.count_differences(ours, theirs)]
    # The in-process launch (the default since 2026-12-03) against the re-exec of old: the same
    # kernels in the window, each launch said in run_info.
    re_db = out / "torch_reexec.db"
    r, _ = python_under_sonde([SCRIPT, "--steps", STEPS], re_db, log, launch=["--re-exec"],
                              **FALLBACK)
    if r.returncode != 0:
        failures.append(f"under sonde --re-exec: exit {r.returncode}: {r.stderr.strip()[-300:]}")
    else:
        failures += [f"{k[:80]}: in-process {a}, --re-exec {b}"
                     for k, a, b in compare.count_differences(ours, compared(re_db))]
        launches = [query(d, "SELECT value FROM run_info WHERE key = 'sonde.launch'")
                    for d in (db, re_db)]
        if launches != [[("in-process",)], [("re-exec",)]]:
            failures.append(f"launches recorded {launches}, not in-process then re-exec")
    figures = {"sonde_kernels": sum(ours.values()), "profiler_kernels": sum(theirs.values()),
               "names": len(theirs), "backward_kernels": len(backward)}
    return verdict(name, failures, figures)


# Operators torch_steps.py calls from Python that no other operator calls (on CUDA): sonde's
# top-level count is torch.profiler's.
EXACT_OPS = ["aten::conv2d", "aten::batch_norm", "aten::relu", "aten::adaptive_avg_pool2d",
             "aten::flatten", "aten::linear", "aten::cross_entropy_loss", "aten::layer_norm",
             "aten::scaled_dot_product_attention", "aten::gelu", "aten::split"]


def operators(out, log, name="torch: operators on CUDA = torch.profiler's counts",
              db="torch.db", trace="torch_trace.json"):
    """The operators of the attribution run (PyTorch 2.x's RecordFunction, never run before on a
    2.x): in the window, counts as torch.profiler's; the backward's kernels beneath the autograd
    node that launched them."""
    db, trace = out / db, out / trace
    if BROKEN:
        return not_run_if_broken(name)
    if FALLBACK or not db.exists() or not trace.exists():
        return verdict(name, ["no profile with operators: the attribution run failed"])
    inside = compare.frame_pattern("run_steps")
    ours = Counter()
    for op, path, thread, calls in operator_rows(db):
        if inside.search(path) or (thread or "").startswith("pt_autograd_"):
            ours[op] += calls
    notes = [m[:200] for (m,) in query(db, "SELECT message FROM notes WHERE topic = 'torch'")]
    if not ours:
        return verdict(name, [f"no operator recorded; torch notes: {notes[:2]}"])
    theirs = compare.trace_op_counts(trace)
    failures = compare.operator_count_failures(ours, theirs, EXACT_OPS)
    orphans = [p for _, p in autograd_kernel_rows(db) if not p or compare.ENGINE not in p]
    if orphans:
        failures.append(f"{len(orphans)} backward kernels not beneath an autograd node, "
                        f"e.g. {str(orphans[0])[-150:]}")
    figures = {"sonde_ops": sum(ours.values()), "names": len(ours),
               "exact": {n: ours.get(n, 0) for n in EXACT_OPS}, "notes": notes[:2]}
    return verdict(name, failures, figures)


def cpu_operators(out, log):
    """The rehearsal's operators check: torch_steps.py on the CPU, under sonde and under
    torch.profiler, compared as on a GPU (the checks' own code, run before a GPU runs it)."""
    name = "torch: operators = torch.profiler's counts (rehearsal, CPU)"
    db, trace = out / "torch_cpu.db", out / "torch_cpu_trace.json"
    args = [SCRIPT, "--steps", STEPS, "--device", "cpu"]
    r, _ = python_under_sonde(args, db, log)
    if r.returncode != 0:
        return verdict(name, [f"under sonde: exit {r.returncode}: {r.stderr.strip()[-300:]}"])
    p, _ = run([TORCH_PYTHON, *args, "--profiler", trace], log)
    if p.returncode != 0:
        return verdict(name, [f"torch.profiler run: exit {p.returncode}: {p.stderr.strip()[-300:]}"])
    return operators(out, log, name, db.name, trace.name)


CPU_MATH = str(KIT / "torch_cpu_math.py")


def cpu_math(out, log):
    """torch_cpu_math.py plain and under sonde: the same digest of every result (sonde's BLAS and
    oneDNN wrappers must forward each call to the code the program would have reached), and which
    BLAS and oneDNN routines sonde saw beneath the operators. A pip wheel links MKL and oneDNN
    into libtorch_cpu.so: whether its calls go through symbols LD_PRELOAD can reach is what the
    figures say (nothing here can tell; Debian's torch links libblas.so.3 and libdnnl.so.2)."""
    name = "torch: CPU math under sonde = plain, BLAS seen"
    db = out / "torch_cpu_math.db"
    p, _ = run([TORCH_PYTHON, CPU_MATH], log)
    if p.returncode != 0:
        return Result(name, NOT_RUN, f"fails without sonde: exit {p.returncode}: "
                                     f"{p.stderr.strip()[-300:]}")
    r, _ = python_under_sonde([CPU_MATH], db, log)
    if r.returncode != 0:
        return verdict(name, [f"under sonde: exit {r.returncode}: {r.stderr.strip()[-300:]}"])
    digest = lambda text: next((x for x in text.splitlines() if x.startswith("digest ")), "")
    failures = [] if digest(p.stdout) and digest(p.stdout) == digest(r.stdout) else [
        f"results differ under sonde: {digest(r.stdout)[:23]} against {digest(p.stdout)[:23]}"]
    seen = query(db, "SELECT r.kind, r.name, SUM(n.calls) FROM nodes n JOIN routines r "
                     "USING (routine_id) WHERE r.kind IN ('blas', 'onednn') AND n.calls > 0 "
                     "GROUP BY r.kind, r.name ORDER BY 3 DESC")
    matmul = query(db, "SELECT SUM(n.calls) FROM nodes n JOIN routines r USING (routine_id) "
                       "WHERE r.kind = 'torch' AND r.name IN ('aten::mm', 'aten::bmm', "
                       "'aten::addmm', 'aten::linear', 'aten::conv2d', "
                       "'aten::convolution_backward')")[0][0] or 0
    notes = [m[:160] for (m,) in query(db, "SELECT message FROM notes WHERE topic IN "
                                           "('torch', 'no-calls', 'blas')")]
    build = next((x for x in p.stdout.splitlines() if x.startswith("torch ")), "")
    if not matmul:
        failures.append("no aten::mm/bmm/addmm/linear/conv2d operator recorded")
    return verdict(name, failures, {"build": build, "matmul_ops": matmul,
                                    "blas_onednn_seen": [f"{k}:{n} x{c}" for k, n, c in seen[:8]],
                                    "notes": notes[:3]})


NCCL_STEPS = 5


def nccl(out, log, backend="nccl"):
    """torch.distributed on NCCL, one rank (torch_nccl.py): each explicit all-reduce a comm op
    of its bytes and group size beneath its frame, init_process_group a set-up row; DDP's bucket
    all-reduces, NCCL's kernels and the NCCL wrappers' rows are reported. The rehearsal runs it
    on gloo."""
    name = ("torch.distributed on NCCL, one rank: comm ops" if backend == "nccl" else
            f"torch.distributed on {backend}, one rank: comm ops (rehearsal, CPU)")
    db = out / f"{backend}.db"
    r, _ = python_under_sonde([str(KIT / "torch_nccl.py"), "--steps", NCCL_STEPS, "--backend",
                               backend], db, log, **FALLBACK)
    if r.returncode != 0:
        return verdict(name, [f"under sonde: exit {r.returncode}: {r.stderr.strip()[-300:]}"])
    told = json.loads(r.stdout.strip().splitlines()[-1])
    rows = query(db, "SELECT c.op, c.kind, c.comm_size, c.bytes, c.calls, p.path, t.name "
                     "FROM comm_ops c JOIN node_paths p USING (node_id) JOIN nodes n "
                     "USING (node_id) JOIN threads t USING (thread_id)")
    explicit, ddp = compare.frame_pattern("explicit_allreduces"), compare.frame_pattern("ddp_steps")
    mine = [x for x in rows if explicit.search(x[5]) and x[1] == "collective"]
    failures = []
    if sum(x[4] for x in mine) != NCCL_STEPS:
        failures.append(f"{sum(x[4] for x in mine)} collectives beneath explicit_allreduces, "
                        f"not {NCCL_STEPS}: {[(x[0], x[3], x[4]) for x in mine]}")
    wrong = [(x[0], x[2], x[3]) for x in mine if (x[2], x[3]) != (1, told["allreduce_bytes"])]
    if wrong:
        failures.append(f"(op, comm_size, bytes) {wrong[:3]}, not (1, {told['allreduce_bytes']})")
    if not any(x[1] == "setup" for x in rows):
        failures.append("no set-up row (init_process_group)")
    # DDP all-reduces every bucket of gradients each step, one rank or many: the buckets
    # partition the parameters, so the bytes add up to the gradients' exactly. Its all-reduce
    # starts in a gradient's accumulation hook: on the CPU beneath ddp_steps, on CUDA in
    # PyTorch's autograd device thread (pt_autograd_N, beneath the AccumulateGrad node), where
    # only ddp_steps runs a backward.
    in_ddp = [x for x in rows if "allreduce" in x[0] and
              (ddp.search(x[5]) or (x[6] or "").startswith("pt_autograd_"))]
    ddp_bytes = sum(x[3] * x[4] for x in in_ddp)
    if backend == "nccl" and not all("AccumulateGrad" in x[5] for x in in_ddp):
        failures.append("a DDP all-reduce not beneath an AccumulateGrad node: "
                        f"{[x[5][-120:] for x in in_ddp if 'AccumulateGrad' not in x[5]][:1]}")
    if ddp_bytes != told["grad_bytes"] * NCCL_STEPS:
        failures.append(f"DDP's all-reduces beneath ddp_steps carried {ddp_bytes} bytes, not "
                        f"{NCCL_STEPS} x the gradients' {told['grad_bytes']}")
    kernels = kernel_rows(db)
    nccl_kernels = [p for k, p, _, _ in kernels if k.startswith("nccl")]
    figures = {"ops": sorted({(x[0], x[1], x[3]) for x in rows})[:12],
               "ddp_bytes": ddp_bytes, "ddp_expected_bytes": told["grad_bytes"] * NCCL_STEPS,
               "nccl_kernels": len(nccl_kernels),
               "nccl_kernels_under_explicit": sum(1 for p in nccl_kernels
                                                  if p and explicit.search(p))}
    return verdict(name, failures, figures)


def graph_origins(out, log):
    """The CUDA graph's kernels, replayed in graph_step, are also under the frame that captured
    them (build, `with torch.cuda.graph(...)`), as many as were replayed. Reads the profile
    attribution() wrote."""
    name = "torch: CUDA graph replays under their capture frame"
    db = out / "torch.db"
    if BROKEN:
        return not_run_if_broken(name)
    if not db.exists():
        return verdict(name, ["no profile: the attribution run failed"])
    replayed, captured = compare.frame_pattern("graph_step"), compare.frame_pattern("build")
    rows = [r for r in graph_origin_rows(db) if r[2] and replayed.search(r[2])]
    n = sum(1 for _, p, _, _ in kernel_rows(db) if p and replayed.search(p))
    failures = [] if rows else ["no kernel replayed in graph_step has a capture path"]
    failures += [f"{k[:60]} captured at ...{o[-120:]}, not beneath build"
                 for k, o, _, _ in rows if not captured.search(o)]
    if sum(r[3] for r in rows) != n:
        failures.append(f"{sum(r[3] for r in rows)} records with a capture path, {n} replayed")
    # One row per process that used CUDA (a compile worker may be one): every one 0.
    unknown = [v for (v,) in query(db, "SELECT value FROM run_info WHERE key = "
                                       "'gpu.graph_unknown'")]
    if not unknown or any(v != "0" for v in unknown):
        failures.append(f"gpu.graph_unknown = {unknown}")
    return verdict(name, failures, {"replayed": n, "kernels": len(rows)})


# The parts of the profiler-inside runs: no torch.compile (its compile is the runs' longest
# part and tells nothing about CUPTI's hand-over), a CUDA graph's replays included.
INSIDE_PARTS = ["--part", "cnn", "--part", "transformer", "--part", "graph"]


def profiler_inside(out, log, teardown=False):
    """torch.profiler inside a run under sonde: its trace has kernels, and sonde's records
    resume after it stops (as many beneath after_profiler_steps as beneath the first window).
    Kineto keeps CUPTI after stopping unless TEARDOWN_CUPTI=1 (libkineto's
    CuptiActivityApi.cpp: only then does it finalize CUPTI), so the default run is expected to
    fail (sonde cannot take back what was never given up) and the TEARDOWN_CUPTI=1 run must
    pass: sonde takes CUPTI back when the other client finalizes it (checked on the stubs)."""
    name = ("torch.profiler inside sonde, TEARDOWN_CUPTI=1: both record" if teardown else
            "torch.profiler inside sonde: both record")
    tag = "_teardown" if teardown else ""
    if BROKEN:
        return not_run_if_broken(name)
    db, trace = out / f"inside{tag}.db", out / f"inside{tag}_trace.json"
    env = dict(FALLBACK, **({"TEARDOWN_CUPTI": 1} if teardown else {}))
    r, _ = python_under_sonde([SCRIPT, "--steps", STEPS, *INSIDE_PARTS, "--profiler-inside",
                               trace], db, log, **env)
    why = "" if teardown else "Kineto keeps CUPTI after torch.profiler stops (no TEARDOWN_CUPTI)"
    if r.returncode != 0:
        return verdict(name, [f"exit {r.returncode}: {r.stderr.strip()[-300:]}"], expected_fail=why)
    theirs = json.loads(r.stdout.strip().splitlines()[-1])["profiler_kernels"]
    kernels = kernel_rows(db)
    before = sum(window(kernels).values())
    after = sum(window(kernels, "after_profiler_steps", ()).values())
    failures = []
    if theirs == 0:
        failures.append("torch.profiler's trace has no kernels")
    if before == 0:
        failures.append("sonde recorded no kernel before the profiler started")
    if after != before:
        failures.append(f"sonde after the profiler stopped: {after} kernels, before it: {before}")
    notes = [m[:100] for (m,) in query(db, "SELECT message FROM notes WHERE topic = "
                                           "'gpu-other-client'")]
    return verdict(name, failures, {"profiler_kernels": theirs, "sonde_before": before,
                                    "sonde_after": after, "note": notes[:1]}, expected_fail=why)


def breakdown(out, log):
    """The iteration breakdown in device time (torch_breakdown.py): every device second in one
    row, each phase its work, backward about 3/2 of forward on the device, host forward below
    device forward."""
    name = "torch: breakdown in device time"
    db = out / "breakdown.db"
    r, _ = python_under_sonde([str(KIT / "torch_breakdown.py"), "--steps", 20], db, log,
                              **FALLBACK)
    if r.returncode != 0:
        return verdict(name, [f"under sonde: exit {r.returncode}: {r.stderr.strip()[-300:]}"])
    m, _ = run([CLI, "metrics", db, "--section", "breakdown", "--format", "json"], log)
    if m.returncode != 0:
        return verdict(name, [f"sonde metrics: exit {m.returncode}: {m.stderr.strip()[-300:]}"])
    b = json.loads(m.stdout)["breakdown"]
    (total_ns,), = query(db, "SELECT COALESCE(SUM(ns), 0) FROM gpu_activity_ns")
    by = {p["phase"]: p for p in b.get("phases", [])}
    figures = {"iterations": b.get("iterations"),
               "gpu_ms_per_iter": {k: v.get("gpu_ms_per_iter") for k, v in by.items()},
               "host_ms_per_iter": {k: v.get("ms_per_iter") for k, v in by.items()},
               "threads": [t for (t,) in query(db, "SELECT DISTINCT name FROM threads")],
               "notes": b.get("notes", [])}
    return verdict(name, compare.breakdown_failures(b, total_ns / 1e9), figures)


def paired_overhead(name, plain_cmd, profiled, pairs, bound, log, parse=None):
    """Plain and profiled runs alternated `pairs` times; the median of profiled/plain. `parse`
    reads a run's own time from its output (else its wall time counts)."""
    plain, prof, failures = [], [], []
    for i in range(pairs):
        for cmd, times in ((plain_cmd, plain), (profiled, prof)):
            r, wall = cmd(i)
            if r.returncode != 0:
                failures.append(f"exit {r.returncode}: {r.stderr.strip()[-200:]}")
                continue
            times.append(parse(r.stdout) if parse else wall)
    ratio = compare.paired_ratio(plain, prof)
    if ratio is None:
        failures.append("no pair completed")
    elif bound is not None and ratio > bound:
        failures.append(f"median ratio {ratio:.3f} over the bound {bound}")
    figures = {"median_ratio": round(ratio, 3) if ratio else None, "pairs": len(plain),
               "plain_s": [round(t, 4) for t in plain], "profiled_s": [round(t, 4) for t in prof],
               "bound": bound}
    return verdict(name, failures, figures)


def overhead(out, log):
    if BROKEN:
        return not_run_if_broken("overhead: torch CNN loop, profiled/plain")
    args = [SCRIPT, "--steps", OVERHEAD_STEPS, "--part", "cnn", "--time"]
    loop_s = lambda stdout: json.loads(stdout.strip().splitlines()[-1])["loop_s"]
    return paired_overhead(
        "overhead: torch CNN loop, profiled/plain", lambda i: run([TORCH_PYTHON, *args], log),
        lambda i: python_under_sonde(args, out / f"overhead{i}.db", log, **FALLBACK),
        OVERHEAD_PAIRS, OVERHEAD_BOUND, log, loop_s)
