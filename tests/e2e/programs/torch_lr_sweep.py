"""A learning-rate sweep: train(lr) called once per rate, each call building its own model and
SGD optimizer and running its own loop. One optimizer steps per iteration: 3 rates x STEPS."""
import sys

import torch
import torch.nn as nn


def train(lr, steps):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return loss.item()


def main():
    steps = int(sys.argv[1])
    for lr in (0.1, 0.01, 0.001):
        train(lr, steps)
    print(f"iterations {3 * steps}")


main()
