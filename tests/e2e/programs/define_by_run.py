#!/usr/bin/python3
"""A define-by-run training run shaped as Chainer runs one (chainer/training/trainer.py,
updaters/standard_updater.py, optimizer.py), in numpy: Trainer.run calls the updater's update()
once per iteration; update_core takes the batch from the iterator and calls
optimizer.update(lossfun, x, t), which clears the gradients, runs the forward (Link.__call__ ->
forward), loss.backward() and then every parameter's UpdateRule.update -> update_core_cpu.
So the word "update" holds forward and backward: only the structure tells the phases apart.
Prints the number of iterations run."""
import sys

import numpy


class Variable:
    def __init__(self, data, creator=None):
        self.data, self.creator, self.grad = data, creator, None

    def backward(self):
        self.grad = numpy.ones_like(self.data)
        stack = [self]
        while stack:
            v = stack.pop()
            if v.creator is not None:
                stack.extend(v.creator.backward(v.grad))


class LinearFunction:
    def __init__(self, link, x):
        self.link, self.x = link, x

    def backward(self, gy):
        self.link.W.grad += gy.T.dot(self.x.data)
        self.link.b.grad += gy.sum(axis=0)
        self.x.grad = gy.dot(self.link.W.data)
        return [self.x]


class Link:
    def __call__(self, *args):
        return self.forward(*args)


class Linear(Link):
    def __init__(self, n_in, n_out, rng):
        self.W = Variable(rng.standard_normal((n_out, n_in)).astype(numpy.float32) / n_in ** 0.5)
        self.b = Variable(numpy.zeros(n_out, dtype=numpy.float32))

    def params(self):
        return [self.W, self.b]

    def forward(self, x):
        return Variable(x.data.dot(self.W.data.T) + self.b.data, LinearFunction(self, x))


class Classifier(Link):
    def __init__(self, rng):
        self.l1, self.l2 = Linear(64, 128, rng), Linear(128, 10, rng)

    def params(self):
        return self.l1.params() + self.l2.params()

    def cleargrads(self):
        for p in self.params():
            p.grad = numpy.zeros_like(p.data)

    def forward(self, x, t):
        y = self.l2(self.l1(Variable(x)))
        diff = y.data - numpy.eye(10, dtype=numpy.float32)[t]
        return Variable(numpy.float32((diff * diff).mean()), _Loss(y, diff))


class _Loss:
    def __init__(self, y, diff):
        self.y, self.diff = y, diff

    def backward(self, gy):
        self.y.grad = 2 * self.diff / self.diff.size * gy
        return [self.y]


class UpdateRule:
    def update(self, param):
        self.update_core(param)

    def update_core(self, param):
        self.update_core_cpu(param)

    def update_core_cpu(self, param):
        param.data -= 0.01 * param.grad


class Optimizer:
    def setup(self, target):
        self.target, self.rule = target, UpdateRule()

    def update(self, lossfun, *args):
        self.target.cleargrads()
        loss = lossfun(*args)
        loss.backward()
        for param in self.target.params():
            self.rule.update(param)


class SerialIterator:
    def __init__(self, x, t, batch):
        self.x, self.t, self.batch, self.pos = x, t, batch, 0

    def __next__(self):
        i = self.pos
        self.pos = (self.pos + self.batch) % len(self.t)
        return self.x[i:i + self.batch], self.t[i:i + self.batch]


class StandardUpdater:
    def __init__(self, iterator, optimizer):
        self.iterator, self.optimizer, self.iteration = iterator, optimizer, 0

    def update(self):
        self.update_core()
        self.iteration += 1

    def update_core(self):
        x, t = next(self.iterator)
        self.optimizer.update(self.optimizer.target, x, t)


class Trainer:
    def __init__(self, updater, stop):
        self.updater, self.stop = updater, stop

    def run(self):
        while self.updater.iteration < self.stop:
            self.updater.update()


def main():
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 25
    rng = numpy.random.default_rng(0)
    x = rng.standard_normal((1000, 64)).astype(numpy.float32)
    t = rng.integers(0, 10, 1000)
    model = Classifier(rng)
    optimizer = Optimizer()
    optimizer.setup(model)
    trainer = Trainer(StandardUpdater(SerialIterator(x, t, 100), optimizer), iterations)
    trainer.run()
    print("iterations", trainer.updater.iteration)


if __name__ == "__main__":
    main()
