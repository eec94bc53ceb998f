"""A training loop in Chainer's shape: Optimizer.update(lossfun, *args) computes the loss
(forward), runs backward, then calls update() on every parameter, which hands it to its update
rule's update_core_cpu (Adam, numpy in place). The forward and backward are element-wise numpy
work with a small GEMM each, so the update (of an embedding, too) is a third or so of
Optimizer.update's time."""
import sys

import numpy as np

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 20
LAYERS, WIDTH, BATCH, VOCAB = 16, 512, 256, 2048
rng = np.random.default_rng(0)


class AdamRule:
    def __init__(self, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps

    def update_core_cpu(self, param):
        m, v, g = param.m, param.v, param.grad
        m *= self.beta1
        m += (1 - self.beta1) * g
        v *= self.beta2
        v += (1 - self.beta2) * g * g
        param.data -= self.lr * m / (np.sqrt(v) + self.eps)


class Parameter:
    def __init__(self, shape, rule):
        self.data = rng.standard_normal(shape).astype(np.float32) * 0.01
        self.grad = np.zeros_like(self.data)
        self.m = np.zeros_like(self.data)
        self.v = np.zeros_like(self.data)
        self.rule = rule

    def update(self):
        self.rule.update_core_cpu(self)


class Model:
    def __init__(self, rule):
        self.w = Parameter((WIDTH, WIDTH), rule)
        self.b = Parameter((WIDTH,), rule)
        # An embedding whose gradient is dense, as Chainer's EmbedID's is: updated every step.
        self.embed = Parameter((VOCAB, WIDTH), rule)

    def params(self):
        yield self.w
        yield self.b
        yield self.embed

    def forward(self, x):
        h = x @ self.w.data + self.b.data
        for _ in range(LAYERS):  # activations: element-wise work, as a deep net's layers are
            h = np.maximum(h, 0.01 * h)
        self.h = h
        return float((h * h).mean())

    def backward(self, x):
        gh = 2 * self.h / self.h.size
        for _ in range(LAYERS):
            gh = np.where(gh > 0, gh, 0.01 * gh)
        self.w.grad[...] = x.T @ gh
        self.b.grad[...] = gh.sum(axis=0)


class Optimizer:
    def __init__(self, model):
        self.target = model

    def update(self, lossfun, *args):
        loss = lossfun(*args)
        self.target.backward(*args)
        for param in self.target.params():
            param.update()
        return loss


model = Model(AdamRule())
opt = Optimizer(model)
x = rng.standard_normal((BATCH, WIDTH)).astype(np.float32)
for step in range(STEPS):
    loss = opt.update(model.forward, x)
print(f"loss {loss:.6f}")
