"""A seeded small CNN trained on two batch sizes (16, then a last batch of 5), so that its
operators run with two input signatures each. Prints the loss, which must not change under
sonde. With `--profiler FILE`, runs the same under torch.profiler with record_shapes (the legacy
autograd profiler: every operator event with its scope and input shapes) and writes per
operator and input shapes the count of FUNCTION-scope events to FILE as JSON, and per operator
the FLOPs torch.profiler's with_flops counts ("flops|aten::addmm")."""
import json
import sys

import torch


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(4 * 13 * 13, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = None
    for batch in (16, 16, 16, 5):
        x = torch.randn(batch, 1, 28, 28)
        y = torch.randint(0, 10, (batch,))
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    print(f"loss {float(loss):.6f}")


if len(sys.argv) > 2 and sys.argv[1] == "--profiler":
    with torch.autograd.profiler.profile(use_kineto=False, record_shapes=True,
                                         with_flops=True) as prof:
        main()
    out = {}
    for e in prof.function_events:
        if e.scope == 0:
            key = f"{e.name}|{e.input_shapes}"
            out[key] = out.get(key, 0) + 1
            if e.flops:
                out[f"flops|{e.name}"] = out.get(f"flops|{e.name}", 0) + e.flops
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)
else:
    main()
