"""Gradient accumulation under a learning-rate scheduler, as nanoGPT-style loops write it:
ACCUM micro-batches' backward passes for each optimizer step, and the scheduler stepped after
it (the scheduler wraps opt.step in its own wrapper). Usage: torch_accum_sched.py STEPS ACCUM
[heads]: with `heads`, the model's two heads are an nn.ModuleDict, built in main (its
constructor calls ModuleDict.update, a dictionary method)."""
import sys

import torch
from torch import nn


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(32, 64), nn.ReLU())
        self.heads = nn.ModuleDict({"a": nn.Linear(64, 4), "b": nn.Linear(64, 4)})

    def forward(self, x):
        h = self.body(x)
        return self.heads["a"](h) + self.heads["b"](h)


def main():
    steps, accum = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    if sys.argv[3:] == ["heads"]:
        model = TwoHeads()
    else:
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
