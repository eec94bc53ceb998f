"""A Python workload for the export tests: a function whose name is HTML (the SVG flame graph
must show it as text), numpy GEMMs under it, and N calls of a small function (trace mode turns
each into an event, enough for the export's progress line)."""
import sys

import numpy as np

HOSTILE = "<img src=x onerror=alert(1)>"


def gemms():
    a = np.ones((96, 96), dtype=np.float32)
    for _ in range(40):
        a = a @ a / 96.0
    return float(a[0, 0])


def tiny(i):
    return i + 1


def main(calls):
    hostile = type(gemms)(gemms.__code__.replace(co_name=HOSTILE, co_qualname=HOSTILE), globals())
    total = 0
    for i in range(calls):
        total = tiny(total)
    print(hostile(), total)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
