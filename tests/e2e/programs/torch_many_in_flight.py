"""Two gloo ranks (torch.multiprocessing.spawn). The main thread posts 150 all-reduces at once
(async_op=True, floats 100+k), as hand-written data parallelism posts one per parameter, and
then waits on each; a side thread (a metrics thread) makes 3 all-reduces of 2,500 floats on a
group of its own and ends. Prints each rank's all-reduce calls and bytes, from its tensors."""
import os
import sys
import threading

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

IN_FLIGHT = 150


def worker(rank, world):
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    side = dist.new_group([0, 1])
    sent = [0, 0]

    def metrics():
        buf = torch.zeros(2500)
        for _ in range(3):
            dist.all_reduce(buf, group=side)
            sent[0] += 1
            sent[1] += buf.numel() * buf.element_size()

    thread = threading.Thread(target=metrics)
    thread.start()
    tensors = [torch.ones(100 + k) for k in range(IN_FLIGHT)]
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for w in works:
        w.wait()
    thread.join()
    sent[0] += len(tensors)
    sent[1] += sum(t.numel() * t.element_size() for t in tensors)
    dist.barrier()
    os.write(1, f"rank {rank} {sent[0]} {sent[1]}\n".encode())
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = sys.argv[1]
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
