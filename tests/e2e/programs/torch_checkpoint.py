"""Activation checkpointing: four blocks under torch.utils.checkpoint, whose forward runs again
inside the backward pass to recompute the activations it did not keep."""
import sys

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(64, 64), nn.Tanh()) for _ in range(4))
        self.head = nn.Linear(64, 4)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)
        return self.head(x)


def main():
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for _ in range(steps):
        x = torch.randn(32, 64, requires_grad=True)
        y = torch.randint(0, 4, (32,))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    print(f"steps {steps}")


main()
