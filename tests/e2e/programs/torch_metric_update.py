"""A torch training loop beside a metrics class with an update() method, as torchmetrics and the
ImageNet example's AverageMeter have: the optimizer is torch.optim's SGD; Meter.update does 2 ms
of busy bookkeeping a step ("no_grad": its update under @torch.no_grad(), as metrics classes
often are). Prints the steps taken. Usage: torch_metric_update.py [no_grad]"""
import sys
import time

import torch
from torch import nn


class Meter:
    def __init__(self):
        self.total = 0.0

    def update(self, logits, y):
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
        self.total += float((logits.argmax(1) == y).sum())


class NoGradMeter:
    def __init__(self):
        self.total = 0.0

    @torch.no_grad()
    def update(self, logits, y):
        end = time.perf_counter() + 0.002
        while time.perf_counter() < end:
            pass
        self.total += float((logits.argmax(1) == y).sum())


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Linear(16, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    meter = NoGradMeter() if sys.argv[1:] == ["no_grad"] else Meter()
    x, y = torch.randn(32, 16), torch.randint(0, 4, (32,))
    steps = 0
    for _ in range(40):
        out = model(x)
        loss = nn.functional.cross_entropy(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        meter.update(out.detach(), y)
        steps += 1
    print("steps", steps)


if __name__ == "__main__":
    main()
