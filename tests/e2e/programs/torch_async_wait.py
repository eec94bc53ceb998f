"""Two gloo ranks (torch.multiprocessing.spawn): each of 15 steps computes (rank 1 80 ms of CPU,
rank 0 20 ms), then sync() posts an all-reduce with async_op=True and waits on it with the
program's own work.wait(), where rank 0 waits for rank 1; a blocking all_reduce of a scalar
ends each step (torch.distributed waits on it inside its own frame). Prints each rank's sums."""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def spin(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(range(1000))


def compute(rank):
    spin(0.08 if rank == 1 else 0.02)
    return torch.full((1000,), float(rank + 1))


def sync(t):
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    return t


def run(rank, world):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    for _ in range(15):
        t = sync(compute(rank))
        total = t[:1].clone()
        dist.all_reduce(total)
    os.write(1, f"rank {rank} {float(t[0]):.1f} {float(total[0]):.1f}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(run, args=(2,), nprocs=2, join=True)
