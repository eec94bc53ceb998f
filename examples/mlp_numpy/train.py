#!/usr/bin/python3
"""Chainer's MNIST MLP in plain numpy: sonde's Python reference workload.

The network, optimizer and data of examples/mlp_cpp (784-1000-1000-10, ReLU, softmax
cross-entropy, batch 100, Adam, float32), written the way Chainer 3-7 runs them on a CPU, which is
what the K-computer poster (Kuroda et al.) profiled with cProfile:

* every matrix product is one numpy ``dot`` on its own line in ``Linear.forward`` /
  ``Linear.backward`` (Chainer's linear.py: ``y = x.dot(W.T)``, ``gx = gy.dot(W)``,
  ``gW = gy.T.dot(x)``), so each sgemm that numpy hands to BLAS has one Python call site;
* Adam's per-parameter step is ``update_core_cpu``, three whole-array numpy statements over each
  parameter, called once per parameter per step from ``Adam.update`` (the poster's 84 %).

The synthetic data, initial weights and minibatch order come from the same splitmix64 streams,
drawn in the same order, as mlp_cpp's, so the two programs train on the same samples from the same
starting point.

Run with Debian's /usr/bin/python3 (numpy linked to the system OpenBLAS). stdout depends only on
the options and the BLAS thread count (OPENBLAS_NUM_THREADS); the wall time goes to stderr.
"""

import argparse
import math
import os
import sys
import time

import numpy

IMAGE_SIZE = 28 * 28
CLASSES = 10
SYNTHETIC_TRAIN = 10000
SYNTHETIC_TEST = 2000

# ----------------------------------------------------------------------------------------------
# Random numbers: splitmix64 as in examples/mlp_cpp/rng.hpp, vectorised. Draw k of a stream is a
# pure function of (seed + k * gamma), so a block of draws is computed at once.

_MASK64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


class Rng:
    def __init__(self, seed):
        self.state = seed & _MASK64

    def draws(self, n):
        """The next n raw 64-bit outputs (as next_u64() called n times)."""
        k = numpy.arange(1, n + 1, dtype=numpy.uint64)
        z = numpy.uint64(self.state) + k * numpy.uint64(_GAMMA)  # array arithmetic wraps mod 2^64
        self.state = (self.state + n * _GAMMA) & _MASK64
        z = (z ^ (z >> numpy.uint64(30))) * numpy.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> numpy.uint64(27))) * numpy.uint64(0x94D049BB133111EB)
        return z ^ (z >> numpy.uint64(31))


def as_uniform(raw):
    """Uniform in [0, 1) from the top 53 bits, as Rng::uniform()."""
    return (raw >> numpy.uint64(11)).astype(numpy.float64) * (2.0 ** -53)


def as_normal(raw_pairs_a, raw_pairs_b):
    """Box-Muller from consecutive draw pairs, as Rng::normal() (one value per two draws)."""
    u1 = 1.0 - as_uniform(raw_pairs_a)
    u2 = as_uniform(raw_pairs_b)
    return numpy.sqrt(-2.0 * numpy.log(u1)) * numpy.cos(6.283185307179586 * u2)


def normals(rng, n):
    raw = rng.draws(2 * n)
    return as_normal(raw[0::2], raw[1::2])


# ----------------------------------------------------------------------------------------------
# Data


class DataError(Exception):
    pass


MIN_OWN_WEIGHT = 0.5  # a sample is at least half its own class's prototype
NOISE = 0.5  # Gaussian pixel noise


def sample_set(prototypes, n, rng, chunk=1000):
    """n samples, each drawing: label, distractor class, mixing weight, then 784 normals."""
    per_sample = 3 + 2 * IMAGE_SIZE
    images = numpy.empty((n, IMAGE_SIZE), dtype=numpy.float32)
    labels = numpy.empty(n, dtype=numpy.int64)
    protos = prototypes.astype(numpy.float64)
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        raw = rng.draws(rows * per_sample).reshape(rows, per_sample)
        label = (raw[:, 0] % numpy.uint64(CLASSES)).astype(numpy.int64)
        other = (label + 1 + (raw[:, 1] % numpy.uint64(CLASSES - 1)).astype(numpy.int64)) % CLASSES
        own = MIN_OWN_WEIGHT + (1.0 - MIN_OWN_WEIGHT) * as_uniform(raw[:, 2])
        noise = as_normal(raw[:, 3::2], raw[:, 4::2])
        x = own[:, None] * protos[label] + (1.0 - own[:, None]) * protos[other] + NOISE * noise
        images[start:start + rows] = numpy.clip(x, 0.0, 1.0)
        labels[start:start + rows] = label
    return images, labels


def blank_border(images, width=4):
    """MNIST's digits sit in the central 20x20 pixels: a frame of exact zeros around them."""
    square = images.reshape(-1, 28, 28)
    square[:, :width, :] = 0
    square[:, -width:, :] = 0
    square[:, :, :width] = 0
    square[:, :, -width:] = 0


def make_synthetic(seed):
    """Ten prototype images plus per-sample mixing and noise, all determined by seed."""
    rng = Rng(seed ^ 0xD1B54A32D192ED03)
    prototypes = as_uniform(rng.draws(CLASSES * IMAGE_SIZE)).astype(numpy.float32)
    prototypes = prototypes.reshape(CLASSES, IMAGE_SIZE)
    train = sample_set(prototypes, SYNTHETIC_TRAIN, rng)
    test = sample_set(prototypes, SYNTHETIC_TEST, rng)
    return train, test


def read_file(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DataError("cannot open %s (%s)" % (path, e.strerror)) from None


def read_idx_images(path):
    data = read_file(path)
    if len(data) < 16:
        raise DataError("%s: too short for an idx3 header" % path)
    magic, count, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in range(0, 16, 4))
    if magic != 0x803:
        raise DataError("%s: bad magic (not an idx3 image file)" % path)
    if rows != 28 or cols != 28:
        raise DataError("%s: images are %dx%d, expected 28x28" % (path, rows, cols))
    if count == 0 or len(data) != 16 + count * IMAGE_SIZE:
        raise DataError("%s: size does not match header count %d" % (path, count))
    pixels = numpy.frombuffer(data, dtype=numpy.uint8, offset=16).reshape(count, IMAGE_SIZE)
    return pixels.astype(numpy.float32) / numpy.float32(255)  # Chainer's get_mnist scaling


def read_idx_labels(path):
    data = read_file(path)
    if len(data) < 8:
        raise DataError("%s: too short for an idx1 header" % path)
    magic, count = (int.from_bytes(data[i:i + 4], "big") for i in (0, 4))
    if magic != 0x801:
        raise DataError("%s: bad magic (not an idx1 label file)" % path)
    if count == 0 or len(data) != 8 + count:
        raise DataError("%s: size does not match header count %d" % (path, count))
    labels = numpy.frombuffer(data, dtype=numpy.uint8, offset=8).astype(numpy.int64)
    if labels.max() >= CLASSES:
        raise DataError("%s: label out of range 0..9" % path)
    return labels


def load_pair(directory, prefix):
    images_path = os.path.join(directory, prefix + "-images-idx3-ubyte")
    images = read_idx_images(images_path)
    labels = read_idx_labels(os.path.join(directory, prefix + "-labels-idx1-ubyte"))
    if len(images) != len(labels):
        raise DataError("%s: image count differs from its label file" % images_path)
    return images, labels


def load_mnist(directory):
    return load_pair(directory, "train"), load_pair(directory, "t10k")


class BatchSampler:
    """Minibatches without replacement; reshuffles when fewer than a batch remain (Chainer's
    SerialIterator), with the same Fisher-Yates draws as mlp_cpp's BatchSampler."""

    def __init__(self, size, seed):
        self.order = list(range(size))
        self.rng = Rng(seed)
        self.shuffle()

    def shuffle(self):
        order = self.order
        raw = self.rng.draws(len(order) - 1).tolist()
        for j, i in enumerate(range(len(order), 1, -1)):
            k = raw[j] % i
            order[i - 1], order[k] = order[k], order[i - 1]
        self.pos = 0

    def next(self, batch):
        if self.pos + batch > len(self.order):
            self.shuffle()
        index = self.order[self.pos:self.pos + batch]
        self.pos += batch
        return index


# ----------------------------------------------------------------------------------------------
# Model


class Linear:
    """y = x W^T + b, with Chainer's LeCun-normal weights N(0, 1/in) and zero bias."""

    def __init__(self, in_size, out_size, rng):
        scale = math.sqrt(1.0 / in_size)
        w = scale * normals(rng, in_size * out_size)
        self.W = w.astype(numpy.float32).reshape(out_size, in_size)
        self.b = numpy.zeros(out_size, dtype=numpy.float32)
        self.gW = numpy.zeros_like(self.W)
        self.gb = numpy.zeros_like(self.b)
        self.x = None

    def forward(self, x):
        self.x = x
        y = x.dot(self.W.T)
        y += self.b
        return y

    def backward(self, gy, need_gx=True):
        # The first layer's input is data, so Chainer skips its gx (the poster's table lists two
        # gx shapes, three gW shapes).
        self.gW = gy.T.dot(self.x)
        self.gb = gy.sum(axis=0)
        if not need_gx:
            return None
        gx = gy.dot(self.W)
        return gx


def relu(x):
    return numpy.maximum(x, 0, dtype=x.dtype)


def relu_backward(y, gy):
    return gy * (y > 0)


def softmax_cross_entropy(z, labels, mean_over=None):
    """Summed loss (float64), hits, d(mean loss)/dz (float32) over mean_over rows (None: n)."""
    n = z.shape[0]
    shifted = z.astype(numpy.float64) - z.max(axis=1, keepdims=True)
    log_sum = numpy.log(numpy.exp(shifted).sum(axis=1, keepdims=True))
    log_p = shifted - log_sum
    rows = numpy.arange(n)
    loss_sum = float(-log_p[rows, labels].sum())
    correct = int((z.argmax(axis=1) == labels).sum())
    gz = numpy.exp(log_p)
    gz[rows, labels] -= 1.0
    gz /= n if mean_over is None else mean_over
    return loss_sum, correct, gz.astype(numpy.float32)


class MLP:
    def __init__(self, in_size, hidden, classes, rng):
        self.l1 = Linear(in_size, hidden, rng)
        self.l2 = Linear(hidden, hidden, rng)
        self.l3 = Linear(hidden, classes, rng)

    def params(self):
        """(owner, attribute) pairs: the arrays Adam updates in place and their gradients."""
        return [(l, name) for l in (self.l1, self.l2, self.l3) for name in ("W", "b")]

    def forward(self, x, labels, mean_over=None):
        self.h1 = relu(self.l1.forward(x))
        self.h2 = relu(self.l2.forward(self.h1))
        z = self.l3.forward(self.h2)
        loss_sum, correct, self.gz = softmax_cross_entropy(z, labels, mean_over)
        return loss_sum, correct

    def backward(self):
        gh2 = relu_backward(self.h2, self.l3.backward(self.gz))
        gh1 = relu_backward(self.h1, self.l2.backward(gh2))
        self.l1.backward(gh1, need_gx=False)


# ----------------------------------------------------------------------------------------------
# Adam, as Chainer's chainer/optimizers/adam.py (AdamRule.update_core_cpu, eta 1, no weight decay)


class AdamHyperparameter:
    def __init__(self, alpha=0.001, beta1=0.9, beta2=0.999, eps=1e-8):
        self.alpha = alpha
        self.beta1 = beta1
        self.beta2 = beta2
        self.eps = eps


def update_core_cpu(param, grad, state, hp):
    m, v = state["m"], state["v"]
    t = state["t"]
    lr = hp.alpha * math.sqrt(1.0 - hp.beta2 ** t) / (1.0 - hp.beta1 ** t)
    m += (1 - hp.beta1) * (grad - m)
    v += (1 - hp.beta2) * (grad * grad - v)
    param -= lr * m / (numpy.sqrt(v) + hp.eps)


# A float32 subnormal (below 2**-126): where a weight's gradient has been zero for a long time,
# Adam's moments decay geometrically into this range and stay there for thousands of steps.
SUBNORMAL_MOMENT = 1e-39


class Adam:
    def __init__(self, params, hp=None, subnormal_moments=False):
        self.params = params
        self.hp = hp or AdamHyperparameter()
        self.states = []
        start = SUBNORMAL_MOMENT if subnormal_moments else 0.0
        for owner, name in params:
            p = getattr(owner, name)
            self.states.append({"m": numpy.full_like(p, start), "v": numpy.full_like(p, start),
                                "t": 0})

    def update(self):
        for (owner, name), state in zip(self.params, self.states):
            state["t"] += 1
            update_core_cpu(getattr(owner, name), getattr(owner, "g" + name), state, self.hp)


# ----------------------------------------------------------------------------------------------
# Driver


def evaluate(model, images, labels, batch):
    loss_sum, correct = 0.0, 0
    for start in range(0, len(labels), batch):
        s, c = model.forward(images[start:start + batch], labels[start:start + batch])
        loss_sum += s
        correct += c
    return loss_sum, correct


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
        description="Chainer's MNIST MLP (784-1000-1000-10, ReLU, softmax cross-entropy, Adam) in "
        "float32 numpy, products through numpy.dot, Adam as Chainer's update_core_cpu. "
        "BLAS threads: OPENBLAS_NUM_THREADS.")
    parser.add_argument("--steps", type=positive_int, default=300, help="training steps (300)")
    parser.add_argument("--epochs", type=positive_int,
                        help="N passes over the training set instead of --steps")
    parser.add_argument("--batch", type=positive_int, default=100, help="minibatch size (100)")
    parser.add_argument("--hidden", type=positive_int, default=1000,
                        help="width of both hidden layers (1000)")
    parser.add_argument("--seed", type=non_negative_int, default=1,
                        help="seed for data, weights and shuffling (1)")
    parser.add_argument("--eval-every", type=non_negative_int, default=50,
                        help="print training loss/accuracy every N steps (50; 0: never)")
    parser.add_argument("--subnormal-moments", action="store_true",
                        help="the K computer's underflow: blank MNIST-like image borders (the "
                        "first layer's weights on them get exactly zero gradients) and Adam "
                        "moments that start subnormal, as after a long stretch of zero gradient, "
                        "so those moments stay subnormal; FTZ/DAZ (SONDE_FTZ=1) removes the cost")
    parser.add_argument("--mnist-dir", metavar="DIR",
                        help="train on the MNIST idx files in DIR instead of synthetic data")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.mnist_dir is None:
            (train_x, train_y), (test_x, test_y) = make_synthetic(args.seed)
        else:
            (train_x, train_y), (test_x, test_y) = load_mnist(args.mnist_dir)
    except DataError as e:
        print("train.py: %s" % e, file=sys.stderr)
        sys.exit(2)
    if args.batch > len(train_y):
        print("train.py: --batch %d exceeds the %d training samples" % (args.batch, len(train_y)),
              file=sys.stderr)
        sys.exit(2)
    steps = args.epochs * (len(train_y) // args.batch) if args.epochs else args.steps

    # Separate streams, as in mlp_cpp, so changing the batch size leaves the weights alone.
    model = MLP(IMAGE_SIZE, args.hidden, CLASSES, Rng(args.seed))
    if args.subnormal_moments:
        for images in (train_x, test_x):
            blank_border(images)
    optimizer = Adam(model.params(), subnormal_moments=args.subnormal_moments)
    sampler = BatchSampler(len(train_y), args.seed ^ 0x6A09E667F3BCC909)

    window_loss, window_correct, window_samples = 0.0, 0, 0
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        index = sampler.next(args.batch)
        x = train_x[index]
        y = train_y[index]
        loss_sum, correct = model.forward(x, y)
        model.backward()
        optimizer.update()

        window_loss += loss_sum
        window_correct += correct
        window_samples += args.batch
        if args.eval_every and step % args.eval_every == 0:
            print("step %d loss %.6f train_acc %.4f"
                  % (step, window_loss / window_samples, window_correct / window_samples),
                  flush=True)
            window_loss, window_correct, window_samples = 0.0, 0, 0

    test_loss, test_correct = evaluate(model, test_x, test_y, args.batch)
    seconds = time.perf_counter() - t0
    print("final loss %.6f test_acc %.4f" % (test_loss / len(test_y), test_correct / len(test_y)),
          flush=True)
    # On stderr so stdout stays identical between runs and with or without a profiler.
    print("time_s %.3f" % seconds, file=sys.stderr)


if __name__ == "__main__":
    main()
