"""A seeded small CNN built and trained for a few steps on one thread (conv, relu, pool, linear,
Adam), its last layer applied twice (its gradients accumulated by the autograd engine) and a
hook on the logits' gradient. Prints the loss, which must not change under sonde. With `--profiler FILE`, runs the same
under torch.profiler (the legacy autograd profiler: every RecordFunction event with its scope)
and writes its per-operator counts to FILE as JSON."""
import json
import sys

import torch

STEPS = 3


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 8, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(8 * 13 * 13, 10))
    shared = torch.nn.Linear(10, 10)
    opt = torch.optim.Adam([*model.parameters(), *shared.parameters()], lr=1e-3)
    x = torch.randn(16, 1, 28, 28)
    y = torch.randint(0, 10, (16,))
    for _ in range(STEPS):
        opt.zero_grad()
        logits = model(x)
        logits.register_hook(lambda g: g * 0.5)
        loss = torch.nn.functional.cross_entropy(shared(shared(logits)), y)
        loss.backward()
        opt.step()
    print(f"loss {float(loss):.6f}")


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
