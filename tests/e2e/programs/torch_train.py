#!/usr/bin/python3
"""A small PyTorch training run for the iteration breakdown's tests, in the shapes real scripts
take: the loop inline in main or a train_step function, several epochs, a DataLoader with
workers, zero_grad and clip_grad_norm_, any of several optimizers, an evaluation pass after the
loop, a warm-up forward before it; or (--mode infer) inference only, with no backward at all.
Prints the number of optimizer steps taken."""
import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

OPTIMIZERS = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    "adadelta": lambda p: torch.optim.Adadelta(p),
}


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 10)
        for layer in (self.fc1, self.fc2):  # weight initialisation: set-up, not backward
            nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train_step(model, opt, x, y, clip):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def batches(args, x, y):
    if args.workers is None:
        for i in range(args.steps):
            yield x[i % 8 * 64:(i % 8 + 1) * 64], y[i % 8 * 64:(i % 8 + 1) * 64]
        return
    loader = DataLoader(TensorDataset(x, y), batch_size=64, num_workers=args.workers)
    yield from loader


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--opt", choices=sorted(OPTIMIZERS), default="sgd")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--workers", type=int, help="a DataLoader with N workers (batches of 64)")
    p.add_argument("--clip", action="store_true")
    p.add_argument("--style", choices=("inline", "function"), default="inline")
    p.add_argument("--mode", choices=("train", "infer"), default="train")
    p.add_argument("--progress", action="store_true", help="print each step as it ends")
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    x, y = torch.randn(512, 32), torch.randint(0, 10, (512,))
    model = Net()
    model(x[:1])  # warm-up forward, once, before the loop
    if args.mode == "infer":
        with torch.no_grad():
            for _ in range(args.steps):
                model(x[:64])
        print("steps 0")
        return
    opt = OPTIMIZERS[args.opt](model.parameters())
    steps = 0
    for _ in range(args.epochs):
        for xb, yb in batches(args, x, y):
            if args.style == "function":
                train_step(model, opt, xb, yb, args.clip)
            else:
                opt.zero_grad()
                loss = F.cross_entropy(model(xb), yb)
                loss.backward()
                if args.clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
            steps += 1
            if args.progress:
                print("step", steps, flush=True)
    with torch.no_grad():  # evaluation after the loop: outside the iterations
        model(x)
    print("steps", steps)


if __name__ == "__main__":
    main()
