"""What the device kit compares, as pure functions over rows and traces, so that the rehearsal
can test them on fixtures (test_compare.py) before a GPU ever runs them."""
import json
import re
from collections import Counter


def normalize_kernel(name):
    """One spelling for a kernel name from sonde (its demangler) and from torch.profiler
    (Kineto's): a template function's demangled name starts with its return type, which one
    side may keep and the other drop, and spacing inside template arguments differs."""
    name = re.sub(r"\s+", " ", name.strip())
    if name.startswith("void "):
        name = name[len("void "):]
    return name.replace(", ", ",").replace(" >", ">").replace("< ", "<")


def trace_events(trace):
    """The events of a torch.profiler chrome trace (a path, or what it holds): Kineto's object
    with `traceEvents`, or the bare list the legacy profiler (CPU only, 1.13) writes."""
    if isinstance(trace, (str, bytes)) or hasattr(trace, "__fspath__"):
        with open(trace) as f:
            trace = json.load(f)
    return trace if isinstance(trace, list) else trace.get("traceEvents", [])


def trace_kernel_counts(trace):
    """Kernel launches per name in a torch.profiler chrome trace (trace_events' argument)."""
    return Counter(normalize_kernel(e["name"]) for e in trace_events(trace)
                   if e.get("cat") == "kernel")


def trace_op_counts(trace):
    """Operator events (torch.profiler's `cpu_op`: aten operators, autograd nodes, c10d calls)
    per name in a chrome trace (trace_events' argument); nested calls count too."""
    # The legacy profiler's events have no category: its operators are the CPU's.
    return Counter(e["name"] for e in trace_events(trace) if e.get("cat") == "cpu_op" or
                   ("cat" not in e and e.get("pid") == "CPU functions"))


ENGINE = "autograd::engine::evaluate_function: "


def slack(count):
    """How many calls of an operator torch.profiler's own run may miss: 1.13's legacy profiler,
    on a loaded machine, counted aten::add_ 59 where sonde counted 60 in the clean-clone CI (and
    a red-team's aten::add 4573, then 4574 on a rerun of the same seeded program). What the
    check is for, an operator's nested calls counted as top-level, doubles a count: 2 % of
    it, none under 50 calls."""
    return count // 50


def operator_count_failures(sonde, torch, exact):
    """What is wrong with sonde's operator counts (top-level calls, per name) against
    torch.profiler's (every call, nested ones too) for the same window: the operators in `exact`
    (called from Python and by no other operator) and every autograd node the engine evaluated
    must count the same; no operator may count more than torch.profiler's, beyond the calls its
    own run may miss (slack)."""
    bad = []
    for name in sorted(set(exact) | {n for n in torch if n.startswith(ENGINE)}):
        if sonde.get(name, 0) != torch.get(name, 0):
            bad.append(f"{name}: sonde {sonde.get(name, 0)}, torch.profiler {torch.get(name, 0)}")
    bad += [f"{name}: sonde {n} > torch.profiler {torch.get(name, 0)}"
            for name, n in sorted(sonde.items())
            if n > torch.get(name, 0) + slack(n) and name not in exact]
    return bad


def count_differences(sonde, torch):
    """(name, sonde's count, torch.profiler's) for every kernel whose counts differ."""
    sonde = Counter({normalize_kernel(k): n for k, n in sonde.items()})
    return sorted((name, sonde.get(name, 0), torch.get(name, 0))
                  for name in set(sonde) | set(torch) if sonde.get(name, 0) != torch.get(name, 0))


def frame_pattern(function):
    """A Python frame of `function` as sonde names it: file.py:LINE(function)."""
    return re.compile(r"(^|;)[^;]*:\d+\(" + re.escape(function) + r"\)(;|$)")


def misattributed(rows, scope, frames):
    """Kernel rows (name, call path) launched inside `scope` (a Python function whose frame is on
    the path) that are not beneath one of `frames` (the functions that launch kernels), and rows
    with no call path at all: a kernel sonde did not tie to the frame that launched it."""
    inside = frame_pattern(scope)
    below = [frame_pattern(f) for f in frames]
    bad = []
    for name, path in rows:
        if path is None:
            bad.append((name, path))
        elif inside.search(path) and not any(p.search(path) for p in below):
            bad.append((name, path))
    return bad


def event_time_mismatches(kernel_ns, event_ms, rel=0.05, abs_us=5.0):
    """(launch, kernel us, events us) for each launch whose kernel time (ordered by start) is
    off its cudaEventElapsedTime pair by more than rel x the events' time + abs_us; a count
    mismatch is one entry with None for the launch."""
    if len(kernel_ns) != len(event_ms):
        return [(None, len(kernel_ns), len(event_ms))]
    bad = []
    for i, (ns, ms) in enumerate(zip(kernel_ns, event_ms)):
        k_us, e_us = ns / 1e3, ms * 1e3
        if abs(k_us - e_us) > rel * e_us + abs_us:
            bad.append((i, round(k_us, 2), round(e_us, 2)))
    return bad


def median(values):
    s = sorted(values)
    if not s:
        return None
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def paired_ratio(plain, profiled):
    """The median of profiled/plain over pairs run alternately (each pair saw the same machine
    state, so the ratio, not the absolute time, is the figure)."""
    return median([p / q for q, p in zip(plain, profiled) if q > 0])


def breakdown_failures(b, device_total_s, ratio=(1.3, 1.8)):
    """What is wrong with the device-time breakdown of torch_breakdown.py (`sonde metrics
    --section breakdown --format json`'s `breakdown`), given the device seconds of every
    gpu_activity row: the rows must hold each row once, every phase of the loop its work, the
    backward about 3/2 of the forward (its matrix products), and the host's forward (launch
    time) less than the device's."""
    if not b.get("found"):
        return [f"no training loop found: {b.get('reason')}"]
    if not b.get("gpu"):
        return ["no device time in the breakdown (gpu false)"]
    by = {p["phase"]: p for p in b["phases"]}
    bad = []
    total = sum(p.get("gpu_s") or 0 for p in b["phases"])
    if abs(total - device_total_s) > 1e-9 * max(1.0, device_total_s):
        bad.append(f"the rows' device time {total:.6f} s is not the file's {device_total_s:.6f} s")
    for phase in ("t_h2d", "t_f", "t_b", "t_u"):
        if not by[phase].get("gpu_s"):
            bad.append(f"{phase}: no device time")
    f, bw = by["t_f"].get("gpu_s") or 0, by["t_b"].get("gpu_s") or 0
    if f > 0 and not ratio[0] <= bw / f <= ratio[1]:
        bad.append(f"device t_b / t_f = {bw / f:.2f}, not within {ratio[0]}-{ratio[1]}")
    if f > 0 and (by["t_f"].get("time_s") or 0) >= f:
        bad.append(f"host t_f {by['t_f']['time_s']:.4f} s >= device t_f {f:.4f} s")
    return bad
