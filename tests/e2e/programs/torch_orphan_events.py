"""Two gloo ranks (torch.multiprocessing.spawn) whose steps mix collectives that have a c10d
operator with two that, in torch 1.13, call the process group directly: all_to_all_single and
all_reduce_coalesced. Each step: an all-to-all of 16 floats, an all-reduce of 1,000 floats, a
coalesced all-reduce of 10 and 20 floats, an all-reduce of 250 floats. Prints each rank's sums."""
import os
import sys
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

STEPS = 5


def worker(rank, world):
    warnings.simplefilter("ignore")  # all_reduce_coalesced's deprecation
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    big, small = torch.ones(1000), torch.ones(250)
    for _ in range(STEPS):
        out = torch.empty(16)
        dist.all_to_all_single(out, torch.full((16,), float(rank)))
        dist.all_reduce(big)
        dist.all_reduce_coalesced([torch.ones(10), torch.ones(20)])
        dist.all_reduce(small)
    os.write(1, f"rank {rank} {float(big.sum()):.0f} {float(small.sum()):.0f}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
