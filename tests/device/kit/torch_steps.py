"""The device kit's PyTorch workload (needs CUDA): seeded steps of four kinds, each in a function
of its own so that sonde's call paths say which step launched a kernel:

  cnn_step          a CNN's forward, backward and SGD update (cuDNN convolutions, batch norm)
  transformer_step  a transformer block in bf16 (cuBLASLt matmuls, scaled_dot_product_attention)
  compiled_step     a torch.compile'd function (Triton kernels, launched through the driver)
  graph_step        a CUDA graph replayed

Everything is built and run once first (warm_up: cuDNN and cuBLAS handles, Triton's compile,
the graph's capture); then run_steps is the window that is compared.

  torch_steps.py --steps S                        the window, e.g. under python3 -m sonde
  torch_steps.py --steps S --profiler T.json      the window inside torch.profiler, trace to T
  torch_steps.py --steps S --profiler-inside T.json   torch.profiler started and stopped inside,
                  then after_profiler_steps (run under sonde: do sonde's records resume?)
  torch_steps.py --steps S --time --part cnn      prints the window's time (overhead pairs)
  torch_steps.py --device cpu ...                 the CNN (and the transformer block where the
                  torch has scaled_dot_product_attention) on the CPU: the rehearsal's run of the
                  checks' own code, on a machine without a GPU
"""
import argparse
import contextlib
import json
import time

import torch
import torch.nn.functional as F


DEV = "cuda"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def build(parts):
    torch.manual_seed(0)
    dev = DEV
    w = {}
    if "cnn" in parts:
        w["cnn"] = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.BatchNorm2d(64), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(dev)
        w["opt"] = torch.optim.SGD(w["cnn"].parameters(), lr=0.01)
        w["x"] = torch.randn(64, 3, 32, 32, device=dev)
        w["y"] = torch.randint(0, 10, (64,), device=dev)
    if "transformer" in parts:
        d, h = 256, 8
        w["block"] = torch.nn.ModuleDict({
            "qkv": torch.nn.Linear(d, 3 * d), "out": torch.nn.Linear(d, d),
            "norm": torch.nn.LayerNorm(d), "ff1": torch.nn.Linear(d, 4 * d),
            "ff2": torch.nn.Linear(4 * d, d)}).to(dev, torch.bfloat16)
        w["heads"] = h
        w["tokens"] = torch.randn(8, 128, d, device=dev, dtype=torch.bfloat16)
    if "compiled" in parts:
        w["fn"] = torch.compile(lambda a, b: torch.sin(a) * b + torch.cos(b))
        w["a"] = torch.randn(1 << 20, device=dev)
        w["b"] = torch.randn(1 << 20, device=dev)
    if "graph" in parts:
        w["gx"] = torch.randn(512, 512, device=dev)
        w["gw"] = torch.randn(512, 512, device=dev)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                torch.relu(w["gx"] @ w["gw"])
        torch.cuda.current_stream().wait_stream(side)
        w["graph"] = torch.cuda.CUDAGraph()
        with torch.cuda.graph(w["graph"]):
            w["gy"] = torch.relu(w["gx"] @ w["gw"]) * 0.5
    return w


def cnn_step(w):
    loss = F.cross_entropy(w["cnn"](w["x"]), w["y"])
    w["opt"].zero_grad(set_to_none=True)
    loss.backward()
    w["opt"].step()


def transformer_step(w):
    b = w["block"]
    x = w["tokens"]
    n, t, d = x.shape
    q, k, v = b["qkv"](b["norm"](x)).split(d, dim=-1)
    heads = lambda z: z.view(n, t, w["heads"], d // w["heads"]).transpose(1, 2)
    a = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
    x = x + b["out"](a.transpose(1, 2).reshape(n, t, d))
    return x + b["ff2"](F.gelu(b["ff1"](b["norm"](x))))


def compiled_step(w):
    return w["fn"](w["a"], w["b"])


def graph_step(w):
    w["graph"].replay()


STEPS = {"cnn": cnn_step, "transformer": transformer_step, "compiled": compiled_step,
         "graph": graph_step}
# On the CPU: no CUDA graph, and no torch.compile or scaled_dot_product_attention before 2.0.
CPU_PARTS = ["cnn"] + (["transformer"] if hasattr(F, "scaled_dot_product_attention") else [])


def run_steps(w, parts, steps):
    for _ in range(steps):
        for part in parts:
            STEPS[part](w)
    sync()


def after_profiler_steps(w, parts, steps):
    run_steps(w, parts, steps)


def settle_after_profiler(w, parts):
    # Kineto with TEARDOWN_CUPTI=1 finalizes CUPTI on a thread of its own, started by a CUDA
    # call after the profiler stopped: one uncounted step and a pause let that hand-over end
    # before the counted steps begin.
    run_steps(w, parts, 1)
    time.sleep(0.5)


def warm_up(w, parts):
    # Its backward on this thread: on CUDA, backward runs in PyTorch's autograd device thread
    # (pt_autograd_N), whose tree no Python frame of the window is on; so that thread launches
    # the window's backward kernels alone, and the checks count them all.
    single = getattr(torch.autograd, "set_multithreading_enabled", None)
    with single(False) if single else contextlib.nullcontext():
        for part in parts:
            STEPS[part](w)
        sync()


def profiled(trace, fn, *args):
    act = [torch.profiler.ProfilerActivity.CPU]
    if DEV == "cuda":
        act.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=act) as prof:
        fn(*args)
    prof.export_chrome_trace(trace)
    with open(trace) as f:
        events = json.load(f)
    events = events if isinstance(events, list) else events["traceEvents"]  # legacy: a list
    return sum(1 for e in events if e.get("cat") == "kernel")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--part", action="append", choices=sorted(STEPS))
    ap.add_argument("--profiler")
    ap.add_argument("--profiler-inside")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = ap.parse_args()
    global DEV
    DEV = args.device
    parts = args.part or (list(STEPS) if DEV == "cuda" else CPU_PARTS)
    w = build(parts)
    warm_up(w, parts)
    if args.profiler:
        print(json.dumps({"profiler_kernels": profiled(args.profiler, run_steps, w, parts,
                                                        args.steps)}))
    elif args.profiler_inside:
        run_steps(w, parts, args.steps)
        n = profiled(args.profiler_inside, run_steps, w, parts, args.steps)
        settle_after_profiler(w, parts)
        after_profiler_steps(w, parts, args.steps)
        print(json.dumps({"profiler_kernels": n}))
    else:
        t = time.perf_counter()
        run_steps(w, parts, args.steps)
        print(json.dumps({"loop_s": time.perf_counter() - t}))


if __name__ == "__main__":
    main()
