"""Two gloo ranks (torch.multiprocessing.spawn): rank 1 arrives 0.6 s late (prep(), before
work()) and computes 1.33 times rank 0's work in each of 15 steps inside work() (60 ms of CPU
against 45), which also holds init_process_group and each step's all-reduce. Rank 0 waits for
rank 1 twice: in the rendezvous and in the all-reduces, both inside work(), so its inclusive time
in work() is the longer. Prints each rank's last sum."""
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


def compute(seconds):
    spin(seconds)
    return torch.ones(4)


def prep():
    spin(0.6)


def work(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    t = torch.zeros(1000)
    for _ in range(15):
        t = compute(0.06 if rank == 1 else 0.045).sum().reshape(1).repeat(1000)
        dist.all_reduce(t)
    os.write(1, f"rank {rank} {float(t[0]):.4f}\n".encode())
    dist.destroy_process_group()


def run(rank, world):
    torch.set_num_threads(1)
    if rank == 1:
        prep()
    work(rank, world)


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(run, args=(2,), nprocs=2, join=True)
