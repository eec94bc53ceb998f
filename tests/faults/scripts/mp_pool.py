"""A multiprocessing pool (start method from argv[1]) whose workers multiply matrices with numpy
(BLAS underneath): 4 tasks of 5 products each. Prints the results, which sonde must not change."""
import multiprocessing as mp
import sys

import numpy as np


def work(i):
    a = np.full((64, 64), 1.0 + i)
    for _ in range(5):
        b = a @ a
    return float(b[0, 0])


if __name__ == "__main__":
    with mp.get_context(sys.argv[1]).Pool(2) as pool:
        print(pool.map(work, range(4)))
