#!/usr/bin/python3
"""Two training threads side by side, each with its own model, optimizer and loop of N steps
(a thread per model, as some ensemble and hyper-parameter searches run): the iteration
breakdown sums them, and its shares must stay of the training threads' time. Prints the steps
each thread took."""
import sys
import threading

import torch
import torch.nn.functional as F
from torch import nn


def train(steps, seed, done):
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 32), torch.randint(0, 10, (256,))
    for i in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(x[i % 4 * 64:(i % 4 + 1) * 64]), y[i % 4 * 64:(i % 4 + 1) * 64])
        loss.backward()
        opt.step()
    done[seed] = steps


def main():
    steps = int(sys.argv[1])
    torch.set_num_threads(1)
    done = {}
    threads = [threading.Thread(target=train, args=(steps, seed, done)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("steps", done[1], done[2])


if __name__ == "__main__":
    main()
