"""Optimizers that wrap another, written as their papers' reference code is (an optimizer
subclass holding a base optimizer): "sam" builds its base in its own __init__ and steps it in
second_step; "lookahead" is given a base the program built and steps it inside its own step.
One optimizer each, as the program sees it; "lookahead_gan": two models each stepped by a
Lookahead of its own base (Adam, SGD), from the same line of a helper: two optimizers.
Usage: torch_wrapped_optimizer.py STEPS sam|lookahead|lookahead_gan"""
import sys

import torch
from torch import nn


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self):
        norm = torch.norm(torch.stack([p.grad.norm() for g in self.param_groups
                                       for p in g["params"] if p.grad is not None]))
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self.state[p]["old_p"] = p.data.clone()
                    p.add_(p.grad * (group["rho"] / (norm + 1e-12)))
        self.zero_grad()

    @torch.no_grad()
    def second_step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.data = self.state[p]["old_p"]
        self.base_optimizer.step()
        self.zero_grad()


class Lookahead(torch.optim.Optimizer):
    def __init__(self, base_optimizer, alpha=0.5, k=5):
        self.base = base_optimizer
        super().__init__(base_optimizer.param_groups, dict(alpha=alpha, k=k))
        self.steps = 0

    @torch.no_grad()
    def step(self, closure=None):
        loss = self.base.step(closure)
        self.steps += 1
        if self.steps % self.defaults["k"] == 0:
            for group in self.param_groups:
                for p in group["params"]:
                    slow = self.state[p].setdefault("slow", p.detach().clone())
                    slow.add_(p - slow, alpha=self.defaults["alpha"])
                    p.copy_(slow)
        return loss


def main():
    steps, kind = int(sys.argv[1]), sys.argv[2]
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4))
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    loss_of = lambda: nn.functional.cross_entropy(model(x), y)  # noqa: E731
    if kind == "sam":
        opt = SAM(model.parameters(), torch.optim.SGD, lr=0.05, momentum=0.9)
        for _ in range(steps):
            loss_of().backward()
            opt.first_step()
            loss_of().backward()
            opt.second_step()
    elif kind == "lookahead_gan":
        other = nn.Sequential(nn.Linear(32, 4))
        opts = [Lookahead(torch.optim.Adam(model.parameters(), lr=1e-3)),
                Lookahead(torch.optim.SGD(other.parameters(), lr=1e-2))]

        def step(opt, loss):
            opt.zero_grad()
            loss.backward()
            opt.step()

        for _ in range(steps):
            step(opts[0], loss_of())
            step(opts[1], nn.functional.cross_entropy(other(x), y))
    else:
        opt = Lookahead(torch.optim.AdamW(model.parameters(), lr=1e-3))
        for _ in range(steps):
            opt.zero_grad()
            loss_of().backward()
            opt.step()
    print(f"steps {steps}")


if __name__ == "__main__":
    main()
