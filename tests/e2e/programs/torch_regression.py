"""A polynomial regression trained the way pytorch/examples' regression/main.py trains it: a
plain function makes each batch, and the update is written out by hand over a generator,
`for param in fc.parameters(): param.data.add_(-lr * param.grad)`, every step. The batch maker
is the data loading; Module.parameters() is a generator made and drained each step, not one
feeding the loop its batches."""
import sys

import torch
import torch.nn.functional as F

torch.manual_seed(42)
DEGREE = 4
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 200
W_TARGET = torch.randn(DEGREE, 1) * 5
B_TARGET = torch.randn(1) * 5


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, DEGREE + 1)], 1)


def f(x):
    return x.mm(W_TARGET) + B_TARGET.item()


def get_batch(batch_size=32):
    random = torch.randn(batch_size)
    x = make_features(random)
    return x, f(x)


def main():
    fc = torch.nn.Linear(W_TARGET.size(0), 1)
    for step in range(STEPS):
        batch_x, batch_y = get_batch()
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(batch_x), batch_y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
    print(f"steps {STEPS} loss {loss:.6f}")


main()
