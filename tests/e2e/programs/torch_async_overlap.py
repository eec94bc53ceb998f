"""Two gloo ranks (torch.multiprocessing.spawn): each of 10 steps posts an all-reduce with
async_op=True, computes a matrix product meanwhile, and waits on the work with work.wait(). The
all-reduce's own time in flight is stamped by a callback on its future (the truth sonde's
comm_overlap is held to); each rank prints its sum and that time."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def run(rank, world):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    a = torch.randn(500, 500)
    inflight = 0.0
    for _ in range(10):
        t = torch.full((1000,), float(rank + 1))
        done = {}
        start = time.perf_counter()
        work = dist.all_reduce(t, async_op=True)
        work.get_future().then(lambda f: done.setdefault("at", time.perf_counter()))
        for _ in range(4):
            a = (a @ a) / 500
        work.wait()
        inflight += done.get("at", time.perf_counter()) - start
    os.write(1, f"rank {rank} {float(t[0]):.1f} inflight {inflight:.6f}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(run, args=(2,), nprocs=2, join=True)
