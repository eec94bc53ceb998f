"""A training loop stepping an optimizer of its own: a Lion written as torch.optim.Optimizer
subclasses are (its step under @torch.no_grad(), a loop over each group's parameters making
temporaries), over a deep stack of small Linear layers, so the update is a large share of each
iteration. "adam": torch.optim.Adam instead, the control; "ema": Adam, and a timm-style EMA of the
weights updated from a callback after each step; "ema_step": Adam, and two EMAs of the weights
(two decays, as diffusion models keep) kept in place (mul_, add_) by a function ema_step() called
beside opt.step(); "foreach": the Lion
written over each group's parameter lists with torch._foreach_*.

Usage: torch_own_optimizer.py STEPS [adam|ema|ema_step|foreach]"""
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


class ForeachLion(Optimizer):
    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99)):
        super().__init__(params, dict(lr=lr, betas=betas))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            grads = [p.grad for p in params]
            avgs = [self.state[p].setdefault("exp_avg", torch.zeros_like(p)) for p in params]
            beta1, beta2 = group["betas"]
            update = torch._foreach_mul(avgs, beta1)
            torch._foreach_add_(update, grads, alpha=1 - beta1)
            torch._foreach_add_(params, [u.sign_() for u in update], alpha=-group["lr"])
            torch._foreach_mul_(avgs, beta2)
            torch._foreach_add_(avgs, grads, alpha=1 - beta2)


class ModelEma:
    """An exponential moving average of the model's weights, as timm's ModelEma keeps one."""

    def __init__(self, model, decay=0.999):
        self.decay = decay
        self.shadow = [p.detach().clone() for p in model.parameters()]

    @torch.no_grad()
    def update(self, model):
        for ema_v, model_v in zip(self.shadow, model.parameters()):
            ema_v.copy_(ema_v * self.decay + (1.0 - self.decay) * model_v)


@torch.no_grad()
def ema_step(shadow, model, decay=0.999):
    for ema_v, model_v in zip(shadow, model.parameters()):
        ema_v.mul_(decay).add_(model_v.detach(), alpha=1.0 - decay)


def main():
    steps = int(sys.argv[1])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    layers = []
    for _ in range(16):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(32, 4))
    mode = sys.argv[2] if len(sys.argv) > 2 else "lion"
    opt = Lion(model.parameters()) if mode == "lion" else \
        ForeachLion(model.parameters()) if mode == "foreach" else torch.optim.Adam(model.parameters())
    ema = ModelEma(model) if mode == "ema" else None
    callbacks = [lambda: ema.update(model)] if ema else []
    shadows = {decay: [p.detach().clone() for p in model.parameters()]
               for decay in ((0.999, 0.9999) if mode == "ema_step" else ())}
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    loss_fn = nn.CrossEntropyLoss()
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        for decay, shadow in shadows.items():
            ema_step(shadow, model, decay)
        for on_step_end in callbacks:
            on_step_end()
    print(f"steps {steps} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
