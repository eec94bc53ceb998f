"""The device kit's iteration-breakdown workload (needs CUDA): a training loop whose phases have
a known ratio of device time. A two-layer MLP without biases, N x N weights, on an N x N batch
copied each step from pinned host memory (t_h2d): its forward is two matrix products and the
loss, its backward three matrix products (the first layer's input needs no gradient) and the
loss's gradient, its update SGD over the two weights. In fp32 with TF32 off the products are
nearly all of the device time, so device t_b / t_f is about 3/2. The host never waits inside the
loop (20 steps queue far fewer launches than CUDA's queue holds), so its forward is launch time
and the device's is the products'.

  torch_breakdown.py --steps S [--n N]    e.g. under python3 -m sonde; prints one JSON line
"""
import argparse
import json

import torch


class Mlp(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.a = torch.nn.Linear(n, n, bias=False)
        self.b = torch.nn.Linear(n, n, bias=False)

    def forward(self, x):
        return self.b(torch.relu(self.a(x))).square().mean()


def train(model, opt, host, steps):
    for _ in range(steps):
        x = host.to("cuda", non_blocking=True)
        loss = model(x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--n", type=int, default=4096)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = Mlp(args.n).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    host = torch.randn(args.n, args.n).pin_memory()
    train(model, opt, host, 1)  # cuBLAS handles, the allocator: before the measured loop
    torch.cuda.synchronize()
    train(model, opt, host, args.steps)
    torch.cuda.synchronize()
    print(json.dumps({"steps": args.steps, "n": args.n}))


if __name__ == "__main__":
    main()
