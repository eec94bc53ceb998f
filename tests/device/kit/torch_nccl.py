"""The device kit's torch.distributed workload (needs CUDA and NCCL): a process group of one rank
on the NCCL backend, each kind of communication in a function of its own so that sonde's call
paths say which made it:

  explicit_allreduces  S all-reduces of one float32 tensor of N elements (4 MiB each)
  ddp_steps            S training steps of a DistributedDataParallel MLP (its bucketed
                       gradient all-reduces, launched from the autograd thread's hooks)

  torch_nccl.py --steps S    e.g. under python3 -m sonde; prints one JSON line: the bytes of each
                             explicit all-reduce and of one step's gradients
  torch_nccl.py --backend gloo   the same on the CPU (the rehearsal, without a GPU)
"""
import argparse
import json
import os
import socket

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

N = 1 << 20


def sync(t):
    if t.is_cuda:
        torch.cuda.synchronize()


def explicit_allreduces(t, steps):
    for _ in range(steps):
        dist.all_reduce(t)
    sync(t)


def ddp_steps(model, opt, x, steps):
    for _ in range(steps):
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    sync(x)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--backend", choices=["nccl", "gloo"], default="nccl")
    args = ap.parse_args()
    dev = "cuda" if args.backend == "nccl" else "cpu"
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    if dev == "cuda":
        torch.cuda.set_device(0)
    torch.manual_seed(0)
    dist.init_process_group(args.backend, rank=0, world_size=1)
    t = torch.ones(N, device=dev)
    explicit_allreduces(t, args.steps)
    net = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                              torch.nn.Linear(1024, 16)).to(dev)
    model = DistributedDataParallel(net, device_ids=[0] if dev == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=dev)
    ddp_steps(model, opt, x, args.steps)
    dist.barrier()
    dist.destroy_process_group()
    grad_bytes = sum(p.numel() * p.element_size() for p in net.parameters())
    print(json.dumps({"steps": args.steps, "allreduce_bytes": N * 4, "grad_bytes": grad_bytes,
                      "sum": float(t[0])}))


if __name__ == "__main__":
    main()
