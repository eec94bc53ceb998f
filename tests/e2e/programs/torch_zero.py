"""A training loop with torch.distributed's ZeroRedundancyOptimizer over Adam, in a process group
of one rank (gloo, a file store in the folder given): ZeRO builds itself and the Adam inside it,
one optimizer the program asked for. Usage: torch_zero.py STEPS FOLDER"""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.optim import ZeroRedundancyOptimizer


def main():
    steps, folder = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", init_method="file://" + os.path.join(folder, "store"),
                            rank=0, world_size=1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    for _ in range(steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    dist.destroy_process_group()
    print(f"iterations {steps}")


if __name__ == "__main__":
    main()
