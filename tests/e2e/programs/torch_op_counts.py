"""A seeded small CNN built and trained for a few steps on one thread (conv, relu, pool, linear,
Adam), its last layer applied twice (its gradients accumulated by the autograd engine), a
hook on the logits' gradient, a custom autograd.Function and a checkpointed layer (operators
that Python code run by an operator calls), then one product of a tensor subclass whose
__torch_dispatch__ runs the operator on the tensors it wraps, and one call of an operator of its
own whose Python kernel applies a custom Function (torch.library). Prints the loss, which must not change under sonde. With `--profiler FILE`, runs the same
under torch.profiler (the legacy autograd profiler: every RecordFunction event with its scope)
and writes its per-operator counts to FILE as JSON."""
import json
import sys

import torch
import torch.utils.checkpoint
from torch.utils._pytree import tree_map

STEPS = 3


class Squash(torch.autograd.Function):
    """Its forward and backward are Python, run by the Function's own operator event."""

    @staticmethod
    def forward(ctx, x):
        y = torch.tanh(x)
        ctx.save_for_backward(y)
        return y * 2

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * 2 * (1 - y * y)


class Same(torch.autograd.Function):
    """Returns its input: autograd's C++ makes the output a view of it (aten::view_as), beneath
    the Function's event and after its Python forward has returned."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class Wrapped(torch.Tensor):
    """A tensor subclass as torch's own tests write one: each operator on it runs in Python."""

    @staticmethod
    def __new__(cls, elem):
        r = torch.Tensor._make_wrapper_subclass(cls, elem.size(), dtype=elem.dtype)
        r.elem = elem
        return r

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(x):
            return x.elem if isinstance(x, Wrapped) else x

        def wrap(x):
            return Wrapped(x) if isinstance(x, torch.Tensor) else x

        return tree_map(wrap, func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {})))


class Doubled(torch.autograd.Function):
    """Applied only by the sonde_test::doubled kernel: its own event and its operators are that
    operator's implementation."""

    @staticmethod
    def forward(ctx, x):
        return torch.exp(x).neg()

    @staticmethod
    def backward(ctx, g):
        return g


LIB = torch.library.Library("sonde_test", "DEF")
LIB.define("doubled(Tensor x) -> Tensor")
LIB.impl("doubled", lambda x: Doubled.apply(x), "CPU")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 13 * 13, 10))
    shared = torch.nn.Linear(10, 10)
    head = torch.nn.Linear(10, 10)
    params = [*model.parameters(), *shared.parameters(), *head.parameters()]
    opt = torch.optim.Adam(params, lr=1e-3)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    for _ in range(STEPS):
        opt.zero_grad()
        logits = model(x)
        logits.register_hook(lambda g: g * 0.5)
        hidden = torch.utils.checkpoint.checkpoint(head, Squash.apply(shared(shared(logits))))
        loss = torch.nn.functional.cross_entropy(Same.apply(hidden), y)
        loss.backward()
        opt.step()
    print(f"loss {float(loss):.6f}")
    w = Wrapped(torch.linspace(0, 1, 16).reshape(4, 4))
    # Read by an element, not summed: torch.profiler 1.13 records a .sum() of a tensor made
    # inside __torch_dispatch__ as one aten::sum or, now and then under load, two (the nested
    # sum.dim_IntList), which made the reference count flake.
    print(f"dispatched {float(torch.mm(w, w).elem[3, 3]):.6f}")
    print(f"kernel {float(torch.ops.sonde_test.doubled(torch.ones(3))[0]):.6f}")


def counts(events):
    """Per name, every operator (FUNCTION scope) and autograd node (BACKWARD_FUNCTION) event:
    user scopes (record_function ranges) are the Python hook's regions, not sonde's frames."""
    out = {}
    for e in events:
        if e.scope in (0, 1):
            out[e.name] = out.get(e.name, 0) + 1
    return out


if len(sys.argv) > 2 and sys.argv[1] == "--profiler":
    with torch.autograd.profiler.profile(use_kineto=False) as prof:
        main()
    with open(sys.argv[2], "w") as f:
        json.dump(counts(prof.function_events), f)
else:
    main()
