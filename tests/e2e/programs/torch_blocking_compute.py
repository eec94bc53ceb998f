"""Two gloo ranks (torch.multiprocessing.spawn): each of 6 steps makes a blocking all-reduce,
an all-reduce posted with async_op=True and waited on at once, and a barrier, then computes
COMPUTE_S in plain Python (no torch operator). Nothing is in flight while it computes; each rank
prints its sum and the time it computed."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

COMPUTE_S = 0.05


def compute():
    start = time.perf_counter()
    x = 0
    while time.perf_counter() - start < COMPUTE_S:
        x += 1
    return time.perf_counter() - start


def run(rank, world):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.ones(1000)
    computed = 0.0
    for _ in range(6):
        dist.all_reduce(t)
        dist.all_reduce(t, async_op=True).wait()
        dist.barrier()
        computed += compute()
    os.write(1, f"rank {rank} {float(t[0]):.1f} computed {computed:.6f}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(run, args=(2,), nprocs=2, join=True)
