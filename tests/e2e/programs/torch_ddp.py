"""DistributedDataParallel training on CPU with gloo, as pytorch/examples' DDP example does it,
started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the environment). 2,410
float32 parameters: one gradient bucket, so one all-reduce of 9,640 bytes a step; then 40
all-reduces of 1,000 bytes back to back. Rank 1 sleeps before joining, so rank 0 waits in the
rendezvous: set-up, not imbalance. Last, 5 steps where rank 1 computes 5 times what rank 0 does
in the region "imbalanced", then both meet in a blocking broadcast in the region "waiting",
where rank 0 waits: the imbalance is the computation's, not that phase's nor the broadcast's."""
import os
import time

import torch
import torch.distributed as dist

STEPS = 5
rank = int(os.environ["RANK"])
if rank == 1:
    time.sleep(1.0)
dist.init_process_group("gloo")
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.parallel.DistributedDataParallel(torch.nn.Sequential(
    torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10)))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
torch.manual_seed(1 + rank)
for _ in range(STEPS):
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
# 40 blocking all-reduces back to back, no other operator between them: each must still get its
# bytes (250 float32: 1,000).
t = torch.ones(250)
for _ in range(40):
    dist.all_reduce(t)
a = torch.randn(256, 256) / 16
for _ in range(5):
    with torch.autograd.profiler.record_function("imbalanced"):
        for _ in range(100 if rank == 1 else 20):
            a = torch.tanh(a @ a)
    with torch.autograd.profiler.record_function("waiting"):
        dist.broadcast(t, 0)
print(f"rank {rank} loss {float(loss):.6f} sum {float(t.sum()):.0f}")
dist.destroy_process_group()
