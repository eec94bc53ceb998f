"""A training loop that waits for its batches: a Dataset whose __getitem__ does per-sample work
(a normalisation repeated, as an augmentation pipeline would), read by a DataLoader with no
workers (or WORKERS of them, made again every epoch unless "persistent"), feeding a small
linear model. The data-loading rule's workload. Usage: torch_slow_loader.py EPOCHS [WORKERS
[persistent]]"""
import sys

import torch
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(256, 64, generator=g)
        self.y = torch.randint(0, 4, (256,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        for _ in range(40):  # per-sample work: the loop's bottleneck
            x = (x - x.mean()) / (x.std() + 1e-5)
        return x, self.y[i]


torch.manual_seed(0)
model = torch.nn.Linear(64, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
workers = int(sys.argv[2]) if len(sys.argv) > 2 else 0
loader = DataLoader(Slow(), batch_size=16, num_workers=workers,
                    persistent_workers=sys.argv[3:] == ["persistent"])
epochs = int(sys.argv[1])
for _ in range(epochs):
    for x, y in loader:
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
print("epochs", epochs, "loss", round(float(loss), 4))
