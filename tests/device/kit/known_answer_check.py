"""The known-answer CUDA program (known_answer.cu) under sonde: exact counts per call path, every
kernel under the call path that launched it, nothing unattributed or dropped, and kernel_a's
times against the cudaEventElapsedTime pair around each of its launches."""
import json
import os

import compare
from kit_env import PROGRAM, graph_origin_rows, kernel_rows, query, run_info, under_sonde, verdict

N, M, K, R = 200, 100, 3, 50  # kernel_a launches, Sgemm calls, graph nodes, graph launches
# The tolerance on kernel_a's times: 5 % of the events' time + 5 us (events resolve about
# 0.5 us; the event before a launch completes when the previous kernel does, and the kernel
# starts a few us later on the stream).
REL, ABS_US = 0.05, 5.0


def expected_calls():
    return {"warm;cudaLaunchKernel": 1, "f;cudaLaunchKernel": N, "g;cublasSgemm_v2": M,
            "capture;cudaLaunchKernel": K, "replay;cudaGraphLaunch": R}


def attribution_failures(kernels):
    """Every kernel of the program is under its launching path, in the numbers it launched."""
    failures = []
    by_kind = {"kernel_w(": ("warm;cudaLaunchKernel", 1), "kernel_a(": ("f;cudaLaunchKernel", N),
               "kernel_b(": ("replay;cudaGraphLaunch", R * K)}
    blas = 0
    for prefix, (path, count) in by_kind.items():
        rows = [k for k in kernels if k[0].startswith(prefix)]
        if len(rows) != count:
            failures.append(f"{prefix}...) records {len(rows)}, expected {count}")
        wrong = [k for k in rows if k[1] != path]
        if wrong:
            failures.append(f"{len(wrong)} {prefix}...) records not under {path}: {wrong[0][1]}")
    for name, path, _, _ in kernels:
        if any(name.startswith(p) for p in by_kind):
            continue
        if path is None or not path.startswith("g;cublasSgemm_v2;"):
            failures.append(f"kernel {name} under {path}, not under g;cublasSgemm_v2")
        else:
            blas += 1
    if blas < M:
        failures.append(f"{blas} kernels under g;cublasSgemm_v2, expected at least {M}")
    return failures


def graph_origin_failures(db):
    """kernel_b's R * K replayed records are under the launches that captured its nodes
    (capture;cudaLaunchKernel), as well as under replay;cudaGraphLaunch, and every record a
    graph ran found its node's origin."""
    failures = []
    rows = graph_origin_rows(db)
    want = [("capture;cudaLaunchKernel", "replay;cudaGraphLaunch", R * K)]
    got = [(o, c, n) for name, o, c, n in rows if name.startswith("kernel_b(")]
    if got != want:
        failures.append(f"kernel_b by capture path: {got}, expected {want}")
    others = [r for r in rows if not r[0].startswith("kernel_b(")]
    if others:
        failures.append(f"other kernels with a capture path: {others[:2]}")
    for key, value in (("gpu.graph_records", R * K), ("gpu.graph_unknown", 0)):
        if str(run_info(db, key)) != str(value):
            failures.append(f"{key} = {run_info(db, key)}, expected {value}")
    return failures


def check(out, log):
    db = out / "known_answer.db"
    # check.sh names the CUPTI of PyTorch's wheels where the toolkit has none (see there).
    cupti = {"SONDE_CUPTI_LIBRARY": os.environ["SONDE_KIT_CUPTI"]} \
        if os.environ.get("SONDE_KIT_CUPTI") else {}
    r, _ = under_sonde([PROGRAM, N, M, K, R], db, log, **cupti)
    if r.returncode != 0:
        fail = [f"exit {r.returncode}: {r.stderr.strip()[-300:]}"]
        return [verdict("known-answer: counts and call paths", fail),
                verdict("known-answer: graph replays under their capture path", fail),
                verdict("known-answer: kernel times vs events", fail)]
    answer = json.loads(r.stdout.strip().splitlines()[-1])
    failures = []
    if answer["counts_ok"] == 0:
        failures.append("the kernels' own counts say a launch did not run")
    calls = dict(query(db, "SELECT path, SUM(calls) FROM callpaths GROUP BY path"))
    for path, n in expected_calls().items():
        if calls.get(path) != n:
            failures.append(f"{path}: {calls.get(path)} calls, expected {n}")
    kernels = kernel_rows(db)
    failures += attribution_failures(kernels)
    for key in ("gpu.unattributed", "gpu.dropped"):
        if str(run_info(db, key)) != "0":
            failures.append(f"{key} = {run_info(db, key)}")
    notes = query(db, "SELECT topic, message FROM notes WHERE topic LIKE 'gpu%'")
    failures += [f"note {t}: {m[:120]}" for t, m in notes]
    counts = verdict("known-answer: counts and call paths", failures,
                     {"kernels": len(kernels), "records": run_info(db, "gpu.records")})
    origins = verdict("known-answer: graph replays under their capture path",
                      graph_origin_failures(db), {"graph_records": run_info(db, "gpu.graph_records")})

    a = [(e - s) for name, _, s, e in kernels if name.startswith("kernel_a(") and s is not None]
    bad = compare.event_time_mismatches(a, answer["event_ms"], REL, ABS_US)
    diffs = [abs(ns / 1e3 - ms * 1e3) for ns, ms in zip(a, answer["event_ms"])]
    figures = {"median_kernel_us": round(compare.median(a) / 1e3, 2) if a else None,
               "median_event_us": round(compare.median(answer["event_ms"]) * 1e3, 2),
               "median_abs_diff_us": round(compare.median(diffs), 2) if diffs else None,
               "tolerance": f"{REL:.0%} + {ABS_US} us"}
    times = verdict("known-answer: kernel times vs events",
                    [f"launch {i}: kernel {k} us, events {e} us" if i is not None
                     else f"{k} kernel_a records, {e} event pairs" for i, k, e in bad], figures)
    return [counts, origins, times]
