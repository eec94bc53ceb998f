"""A data-parallel step loop as mpi4py programs write it, for the advice under several ranks:
each rank multiplies float64 matrices (BLAS, OPENBLAS_NUM_THREADS from the caller), rank 1
three times as many as rank 0, then all ranks meet in an MPI_Allreduce. step() does nothing
but call compute(): one imbalance, seen from step(), compute() and <module>."""
import sys

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 10
N = 768
rng = np.random.default_rng(rank)
a = rng.standard_normal((N, N))
b = rng.standard_normal((N, N)) / N


def compute(products):
    x = a
    for _ in range(products):
        x = x @ b
    return float(x.sum())


def step(products):
    return compute(products)


total = np.zeros(1)
for _ in range(STEPS):
    local = np.array([step(1 if rank == 0 else 3)])
    comm.Allreduce(local, total)
print(f"rank {rank} total {total[0]:.6e}")
