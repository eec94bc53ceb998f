#!/usr/bin/python3
"""A training loop fed by a generator function, then work after it that is no data loading: a
generator expression summing the parameters' norms (one call, made after the loop) and an
evaluation over a second generator function, the model called in the loop's own frame. For the
iteration breakdown's tests. Prints the steps run and the evaluation's batches."""
import sys

import torch
from torch import nn
import torch.nn.functional as F


def train_batches(steps, x, y):
    for i in range(steps):
        xb = x[i % 8 * 64:(i % 8 + 1) * 64] + torch.randn(64, 32) * 0.01  # a little loading work
        yield xb, y[i % 8 * 64:(i % 8 + 1) * 64]


def eval_batches(x):
    for i in range(8):
        yield x[i * 64:(i + 1) * 64] * 1.0


def main():
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x, y = torch.randn(512, 32), torch.randint(0, 10, (512,))
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    model(x[:1])  # a warm-up forward before the loop
    done = 0
    for xb, yb in train_batches(steps, x, y):
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
        done += 1
    norm = sum(float(p.detach().pow(2).sum()) for _ in range(400) for p in model.parameters())
    seen = 0
    with torch.no_grad():
        for xb in eval_batches(x):
            model(xb)
            seen += 1
    print(f"steps {done} eval {seen} norm {norm > 0}")


main()
