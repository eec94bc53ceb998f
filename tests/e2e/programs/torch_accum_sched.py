"""Gradient accumulation under a learning-rate scheduler, as nanoGPT-style loops write it:
ACCUM micro-batches' backward passes for each optimizer step, and the scheduler stepped after
it (the scheduler wraps opt.step in its own wrapper). Usage: torch_accum_sched.py STEPS ACCUM"""
import sys

import torch
from torch import nn


def main():
    steps, accum = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.9)
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    for i in range(steps * accum):
        loss = nn.functional.cross_entropy(model(x), y) / accum
        loss.backward()
        if (i + 1) % accum == 0:
            opt.step()
            opt.zero_grad()
            sched.step()
    print(f"steps {steps}")


if __name__ == "__main__":
    main()
