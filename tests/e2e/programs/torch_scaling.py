"""A data-parallel training loop over a fixed global batch, for sonde scaling: each of WORLD_SIZE
ranks (torchrun's variables; gloo) takes its share of the 64-sample batch, 30 steps, DDP's
all-reduce averaging the gradients. Prints its rank and the loop's own time, timed around the
loop alone (imports, rendezvous and teardown outside it, and a 0.2 s wait of the module's own
before and after it: set-up and teardown of no call sonde measures)."""
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
share = slice(rank * 64 // world, (rank + 1) * 64 // world)
time.sleep(0.2)
start = time.perf_counter()
for _ in range(30):
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x[share]), y[share]).backward()
    opt.step()
loop_s = time.perf_counter() - start
time.sleep(0.2)
print(f"rank {rank} loop_s {loop_s:.6f}")
dist.destroy_process_group()
