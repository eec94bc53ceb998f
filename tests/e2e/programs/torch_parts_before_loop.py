"""A loop with no data loader (the batch is made in place), after set-up that walks the model's
parts with generators: an optimizer built from m.parameters() (one generator, drained by its
__init__) and a parameter count over another. Neither feeds the loop a batch."""
import sys

import torch

torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
opt = torch.optim.SGD(m.parameters(), lr=0.01)
count = sum(p.numel() for p in m.parameters())
x, y = torch.randn(8, 16), torch.randn(8, 4)
steps = int(sys.argv[1])
for _ in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(m(x), y)
    loss.backward()
    opt.step()
print("steps", steps, "parameters", count)
