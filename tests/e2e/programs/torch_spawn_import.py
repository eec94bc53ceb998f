"""torch_spawn.py's two gloo ranks (equal work, 10 all-reduces each), where one rank's import
of the main module (spawn imports it again in each worker, before init) is 0.4 s longer
(slow_second_import.py). Set-up, not an imbalance of the training."""
import importlib
import os
import sys

import torch.multiprocessing as mp

from torch_spawn import worker

if __name__ != "__main__":  # in each spawned rank only
    importlib.import_module("slow_second_import")

if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
    print("done")
