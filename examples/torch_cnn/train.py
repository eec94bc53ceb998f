#!/usr/bin/python3
"""A small PyTorch CNN: sonde's framework-level Python workload, on the CPU or (--device cuda) a GPU.

Two Conv2d+ReLU+MaxPool blocks and two Linear layers on synthetic 1x28x28 images (ten classes,
each a smooth random pattern, shifted by up to two pixels and buried in noise), cross-entropy and
torch.optim.Adam. One training step is ``train_step``: ``model(x)``, ``loss.backward()``,
``opt.step()``, so a profiler can attribute the native work (oneDNN/ATen convolutions, GEMMs,
autograd's engine) to those three Python lines.

Everything random comes from ``--seed``; with a fixed ``--threads`` (default 1) and
``torch.use_deterministic_algorithms(True)`` stdout is the same bit for bit from run to run, so a
run under a profiler can be compared with a plain one. On a GPU the images stay on the host and
each batch is copied over, as a DataLoader feeds a GPU; some CUDA kernels have no deterministic
form, so there the run is reproducible only up to their rounding. Wall time goes to stderr.
"""

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

CLASSES = 10
SIDE = 28
TRAIN_SIZE = 4096
TEST_SIZE = 1024
MAX_SHIFT = 2  # pixels, either way, in each direction
NOISE = 0.6


def make_patterns(gen):
    """Ten smooth class patterns in [0, 1]: 7x7 random grids upsampled bilinearly to 28x28."""
    coarse = torch.rand(CLASSES, 1, 7, 7, generator=gen)
    return F.interpolate(coarse, size=(SIDE, SIDE), mode="bilinear", align_corners=False)


def make_set(patterns, n, gen):
    labels = torch.randint(0, CLASSES, (n,), generator=gen)
    shifts = torch.randint(-MAX_SHIFT, MAX_SHIFT + 1, (n, 2), generator=gen).tolist()
    noise = torch.randn(n, 1, SIDE, SIDE, generator=gen)
    images = torch.empty(n, 1, SIDE, SIDE)
    for i, (dy, dx) in enumerate(shifts):
        images[i] = torch.roll(patterns[labels[i]], shifts=(dy, dx), dims=(1, 2))
    return images + NOISE * noise, labels


def make_data(seed):
    gen = torch.Generator().manual_seed(seed)
    patterns = make_patterns(gen)
    return make_set(patterns, TRAIN_SIZE, gen), make_set(patterns, TEST_SIZE, gen)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, kernel_size=5, padding=2)  # 16 x 28 x 28 -> pool 14 x 14
        self.conv2 = nn.Conv2d(16, 32, kernel_size=5, padding=2)  # 32 x 14 x 14 -> pool 7 x 7
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def train_step(model, opt, x, y):
    opt.zero_grad()
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    return loss.item()


@torch.no_grad()
def evaluate(model, images, labels, batch, device):
    loss_sum, correct = 0.0, 0
    for start in range(0, len(labels), batch):
        logits = model(images[start:start + batch].to(device))
        y = labels[start:start + batch].to(device)
        loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        correct += int((logits.argmax(dim=1) == y).sum())
    return loss_sum / len(labels), correct / len(labels)


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer, got %r" % text) from None
    if value < 1:
        raise argparse.ArgumentTypeError("expected an integer >= 1, got %r" % text)
    return value


def non_negative_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer, got %r" % text) from None
    if value < 0:
        raise argparse.ArgumentTypeError("expected an integer >= 0, got %r" % text)
    return value


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        prog="train.py",
        description="Small CNN (2 conv + 2 linear, Adam) on synthetic 28x28 images, PyTorch CPU.")
    parser.add_argument("--steps", type=positive_int, default=50, help="training steps (50)")
    parser.add_argument("--batch", type=positive_int, default=64, help="minibatch size (64)")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch.set_num_threads (1); stdout is reproducible for a fixed value")
    parser.add_argument("--seed", type=non_negative_int, default=1,
                        help="seed for data, weights and batch order (1)")
    parser.add_argument("--eval-every", type=non_negative_int, default=10,
                        help="print the mean training loss every N steps (10; 0: never)")
    parser.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (0.001)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the model runs (cpu)")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("train.py: --device cuda, but torch sees no usable GPU", file=sys.stderr)
            sys.exit(2)
        # cuBLAS is deterministic only with a fixed workspace; max-pool's backward never is.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
    else:
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    (train_x, train_y), (test_x, test_y) = make_data(args.seed)
    if args.batch > len(train_y):
        print("train.py: --batch %d exceeds the %d training samples" % (args.batch, len(train_y)),
              file=sys.stderr)
        sys.exit(2)
    model = Net().to(device)  # initialised from torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    order_gen = torch.Generator().manual_seed(args.seed + 1)
    order, pos = torch.randperm(len(train_y), generator=order_gen), 0

    window, count = 0.0, 0
    t0 = time.perf_counter()
    for step in range(1, args.steps + 1):
        if pos + args.batch > len(order):  # reshuffle when fewer than a batch remain
            order, pos = torch.randperm(len(train_y), generator=order_gen), 0
        index = order[pos:pos + args.batch]
        pos += args.batch
        window += train_step(model, opt, train_x[index].to(device), train_y[index].to(device))
        count += 1
        if args.eval_every and step % args.eval_every == 0:
            print("step %d loss %.6f" % (step, window / count), flush=True)
            window, count = 0.0, 0

    test_loss, test_acc = evaluate(model, test_x, test_y, 256, device)
    seconds = time.perf_counter() - t0
    print("final loss %.6f acc %.4f" % (test_loss, test_acc), flush=True)
    # On stderr so stdout stays identical between runs and with or without a profiler.
    print("time_s %.3f" % seconds, file=sys.stderr)


if __name__ == "__main__":
    main()
