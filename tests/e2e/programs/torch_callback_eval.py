"""A Trainer with Keras/Lightning-style callbacks: after each training step every callback's
on_step_end runs; the validation callback evaluates the model on its own loader every EVERY
steps, inline in on_step_end. Usage: torch_callback_eval.py STEPS EVERY"""
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class LossLogger:
    def __init__(self):
        self.losses = []

    def on_step_end(self, trainer, loss):
        self.losses.append(float(loss))


class Validation:
    def __init__(self, loader, every):
        self.loader, self.every, self.seen = loader, every, 0

    def on_step_end(self, trainer, loss):
        self.seen += 1
        if self.seen % self.every == 0:
            with torch.no_grad():
                for x, y in self.loader:
                    nn.functional.cross_entropy(trainer.model(x), y)


class Trainer:
    def __init__(self, model, callbacks):
        self.model, self.callbacks = model, callbacks
        self.opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def training_step(self, x, y):
        self.opt.zero_grad()
        loss = nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss

    def fit(self, loader, steps):
        done = 0
        while done < steps:
            for x, y in loader:
                loss = self.training_step(x, y)
                for cb in self.callbacks:
                    cb.on_step_end(self, loss)
                done += 1
                if done == steps:
                    return


def main():
    steps, every = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    data = TensorDataset(torch.randn(512, 64), torch.randint(0, 4, (512,)))
    val = TensorDataset(torch.randn(2048, 64), torch.randint(0, 4, (2048,)))
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
    trainer = Trainer(model, [LossLogger(), Validation(DataLoader(val, batch_size=64), every)])
    trainer.fit(DataLoader(data, batch_size=16, shuffle=True), steps)
    print(f"steps {steps}")


if __name__ == "__main__":
    main()
