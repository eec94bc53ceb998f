"""Two gloo ranks started by torch.multiprocessing.spawn, equal work and 10 all-reduces each; one
rank's import of the main module (spawn imports it again in each worker, before init) is 0.4 s
longer (slow_second_import.py). Set-up, not an imbalance of the training."""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

if __name__ != "__main__":
    import slow_second_import  # noqa: F401  (in each spawned rank only)


def worker(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    a = torch.randn(128, 128) / 12
    t = torch.ones(250)
    for _ in range(10):
        for _ in range(10):
            a = torch.tanh(a @ a)
        dist.all_reduce(t)
    os.write(1, f"rank {rank} sum {float(t.sum()):.0f}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
    print("done")
