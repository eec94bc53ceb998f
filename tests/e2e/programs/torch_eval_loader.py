"""An evaluation loop as a DL engineer writes one: model.eval(), torch.inference_mode(), batches
from a DataLoader whose per-sample work (a busy 3 ms "augmentation") is most of the time, no
backward, no optimizer. Prints the accuracy and the batches seen."""
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Samples(Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        end = time.perf_counter() + 0.003
        while time.perf_counter() < end:
            pass
        g = torch.Generator().manual_seed(i)
        return torch.randn(32, generator=g), i % 4


def evaluate(model, loader):
    correct = batches = 0
    with torch.inference_mode():
        for x, y in loader:
            correct += int((model(x).argmax(1) == y).sum())
            batches += 1
    return correct, batches


def main():
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).eval()
    correct, batches = evaluate(model, DataLoader(Samples(), batch_size=8, num_workers=0))
    print("correct", correct, "batches", batches)


if __name__ == "__main__":
    main()
