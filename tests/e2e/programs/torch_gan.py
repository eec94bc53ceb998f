#!/usr/bin/python3
"""A GAN's training loop for the iteration breakdown's tests: a generator and a discriminator,
one optimizer each, two optimizer.step() per iteration (the discriminator's, then the
generator's), fed by a Python generator function of batches. Prints the iterations run."""
import sys

import torch
from torch import nn


def real_batches(steps, x):
    for i in range(steps):
        noise = torch.randn(64, 16) * 0.1  # a little work per batch, as a real loader has
        yield x[i % 4 * 64:(i % 4 + 1) * 64] + noise


def main():
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    gen = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16))
    disc = nn.Sequential(nn.Linear(16, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    opt_g = torch.optim.Adam(gen.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(disc.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    x = torch.randn(256, 16)
    ones, zeros = torch.ones(64, 1), torch.zeros(64, 1)
    iterations = 0
    for real in real_batches(steps, x):
        opt_d.zero_grad()
        fake = gen(torch.randn(64, 8))
        loss_d = bce(disc(real), ones) + bce(disc(fake.detach()), zeros)
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad()
        loss_g = bce(disc(fake), ones)
        loss_g.backward()
        opt_g.step()
        iterations += 1
    print("iterations", iterations)


if __name__ == "__main__":
    main()
