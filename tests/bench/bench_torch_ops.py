#!/usr/bin/python3
"""What recording PyTorch's operators costs (wrappers/torch, docs/torch.md): training steps with
libsonde's RecordFunction callbacks on and off in turns, in one process preloaded with libsonde,
CPU time per step, the median ratio over rounds:

  mnist   pytorch/examples' mnist Net, batch 64, Adadelta (synthetic data)   target < 1.03
  small   a tiny CNN at batch 8 (about 6 us an operator): the worst case, reported

Most of the cost is libtorch's own: with any RecordFunction callback registered, every operator
builds its RecordFunction state, which is what torch.profiler pays too.

  /usr/bin/python3 tests/bench/bench_torch_ops.py [--build-dir build] [--rounds 5]
"""
import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))


def workload(name):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.manual_seed(1)
    if name == "mnist":
        class Net(nn.Module):  # pytorch/examples mnist/main.py
            def __init__(self):
                super().__init__()
                self.conv1, self.conv2 = nn.Conv2d(1, 32, 3, 1), nn.Conv2d(32, 64, 3, 1)
                self.dropout1, self.dropout2 = nn.Dropout(0.25), nn.Dropout(0.5)
                self.fc1, self.fc2 = nn.Linear(9216, 128), nn.Linear(128, 10)

            def forward(self, x):
                x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
                x = F.relu(self.fc1(torch.flatten(self.dropout1(x), 1)))
                return F.log_softmax(self.fc2(self.dropout2(x)), dim=1)
        model, batch, steps = Net(), 64, 20
        opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    else:
        model = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(8 * 13 * 13, 10))
        batch, steps = 8, 200
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x, y = torch.randn(batch, 1, 28, 28), torch.randint(0, 10, (batch,))

    def step():
        opt.zero_grad()
        F.nll_loss(F.log_softmax(model(x), dim=1), y).backward()
        opt.step()
    return step, steps


def measure(rounds):
    """In the preloaded child: the per-step CPU time ratio, callbacks on over off."""
    import torch
    torch.set_num_threads(1)
    lib = ctypes.CDLL(None)
    for name in ("mnist", "small"):
        step, steps = workload(name)
        for _ in range(3):
            step()
        times = {"off": [], "on": []}
        for _ in range(rounds):
            for state in ("off", "on"):
                if state == "on" and lib.sonde_torch_observe(1) != 0:
                    sys.exit("sonde_torch_observe refused")
                t = time.process_time()
                for _ in range(steps):
                    step()
                times[state].append((time.process_time() - t) / steps)
                if state == "on":
                    lib.sonde_torch_unobserve()
        ratios = [a / b for a, b in zip(times["on"], times["off"])]
        target = " (target < 1.03: " + ("met)" if statistics.median(ratios) < 1.03 else "NOT met)")
        print(f"{name:6} ms/step off {1e3 * statistics.median(times['off']):.3f} on "
              f"{1e3 * statistics.median(times['on']):.3f}; ratio median "
              f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f})"
              + (target if name == "mnist" else " (reported)"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(SOURCE, "build"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return measure(a.rounds)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SONDE_")}
    with tempfile.TemporaryDirectory() as tmp:
        env.update(LD_PRELOAD=os.path.join(os.path.abspath(a.build_dir), "lib", "libsonde.so"),
                   SONDE_OUTPUT=os.path.join(tmp, "p.db"), SONDE_PEAKS="/nonexistent")
        r = subprocess.run(["/usr/bin/python3", __file__, "--child", "--rounds", str(a.rounds)],
                           env=env, text=True, capture_output=True)
    sys.stdout.write(r.stdout)
    if r.returncode != 0:
        sys.exit(r.stderr[-2000:])


if __name__ == "__main__":
    main()
