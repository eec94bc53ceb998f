"""A training loop that waits for its batches: a Dataset whose __getitem__ does per-sample work
(a normalisation repeated, as an augmentation pipeline would), read by a DataLoader with no
workers (or WORKERS of them, made again every epoch unless "persistent"), feeding a small
linear model; "iterable": the same samples from an IterableDataset's __iter__, split among the
workers by get_worker_info() ("unsharded": each worker yields every sample); "collate": the
normalisation done by the loader's collate_fn over each stacked batch instead; "validate": a
validation loader of 2 workers iterated in validate() after each epoch; "lazy": the batches
from a feeder's next_batch(), which makes the loader's iterator itself. The data-loading rule's
workload.

Usage: torch_slow_loader.py EPOCHS [WORKERS [persistent] [iterable [unsharded]] [collate]
[validate] [lazy]]"""
import sys

import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info


def normalise(x, dim=-1):
    for _ in range(40):  # the loop's bottleneck
        x = (x - x.mean(dim, keepdim=True)) / (x.std(dim, keepdim=True) + 1e-5)
    return x


def collate(samples):
    return normalise(torch.stack([x for x, _ in samples])), torch.stack([y for _, y in samples])


class Slow(Dataset):
    def __init__(self, per_sample=True):
        self.per_sample = per_sample
        g = torch.Generator().manual_seed(1)
        self.x = torch.randn(256, 64, generator=g)
        self.y = torch.randint(0, 4, (256,), generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return (normalise(self.x[i]) if self.per_sample else self.x[i]), self.y[i]


class SlowStream(IterableDataset):
    def __init__(self, sharded):
        self.samples, self.sharded = Slow(), sharded

    def __iter__(self):
        first, step = 0, 1
        if self.sharded:
            info = get_worker_info()  # each worker its share
            first, step = (0, 1) if info is None else (info.id, info.num_workers)
        for i in range(first, len(self.samples), step):
            yield self.samples[i]


torch.manual_seed(0)
model = torch.nn.Linear(64, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
workers = int(sys.argv[2]) if len(sys.argv) > 2 else 0
options = sys.argv[3:]
batched = "collate" in options
dataset = SlowStream("unsharded" not in options) if "iterable" in options else Slow(not batched)
loader = DataLoader(dataset, batch_size=16, collate_fn=collate if batched else None,
                    num_workers=workers, persistent_workers="persistent" in options)
epochs = int(sys.argv[1])
val_loader = DataLoader(Slow(), batch_size=64, num_workers=2) if "validate" in options else None


def validate():
    with torch.no_grad():
        return sum(float(torch.nn.functional.cross_entropy(model(x), y)) for x, y in val_loader)


class Feeder:
    """Batches one at a time, the iterator made on first use and again at each epoch's end."""

    def __init__(self, loader):
        self.loader, self.it = loader, None

    def next_batch(self):
        if self.it is None:
            self.it = iter(self.loader)
        try:
            return next(self.it)
        except StopIteration:
            self.it = None
            return None


def batches():
    if "lazy" not in options:
        yield from loader
        return
    feeder = Feeder(loader)
    while (batch := feeder.next_batch()) is not None:
        yield batch


for _ in range(epochs):
    for x, y in (loader if "lazy" not in options else batches()):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    if val_loader is not None:
        validate()
print("epochs", epochs, "loss", round(float(loss), 4))
