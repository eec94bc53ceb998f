"""A training loop stepping an optimizer of its own: a Lion written as torch.optim.Optimizer
subclasses are (its step under @torch.no_grad(), a loop over each group's parameters making
temporaries), over a deep stack of small Linear layers, so the update is a large share of each
iteration. "adam": torch.optim.Adam instead, the control. Usage: torch_own_optimizer.py STEPS
[adam]"""
import sys

import torch
from torch import nn
from torch.optim import Optimizer


class Lion(Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.data.mul_(1 - group["lr"] * group["weight_decay"])
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p)
                beta1, beta2 = group["betas"]
                update = state["exp_avg"] * beta1 + p.grad * (1 - beta1)
                p.add_(torch.sign(update), alpha=-group["lr"])
                state["exp_avg"].mul_(beta2).add_(p.grad, alpha=1 - beta2)


def main():
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layers = []
    for _ in range(16):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(32, 4))
    opt = torch.optim.Adam(model.parameters()) if sys.argv[2:] == ["adam"] else \
        Lion(model.parameters())
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
    print(f"steps {steps} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
