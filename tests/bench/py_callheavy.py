#!/usr/bin/python3
"""A call-heavy pure-Python benchmark: what a profiler adds to each Python-level call.

Each repetition runs recursive fib(N) (2 * fib(N + 1) - 1 calls) and a loop of small method calls
on a 2-D point (move, dot, norm2, each a few bytecodes). No builtin is called inside the measured
part, so every profiler event in it is a Python call or return.

Prints "key value" lines (tests/bench/run_benchmarks.py reads them):

  elapsed_s       wall time of the measured part only (time.perf_counter), not start-up
  fib_calls       calls of fib() it made, counted by fib itself
  method_calls    calls of Point.move, Point.dot and Point.norm2 together (counted in the loop)
  calls_total     fib_calls + method_calls + the calls of run() and method_loop()

  /usr/bin/python3 tests/bench/py_callheavy.py [--n 25] [--reps 2] [--loop 100000]
"""

import argparse
import sys
import time

FIB_CALLS = 0


def fib(n):
    global FIB_CALLS
    FIB_CALLS += 1
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


class Point:
    __slots__ = ("x", "y")

    def __init__(self, x, y):
        self.x = x
        self.y = y

    def move(self, dx, dy):
        self.x += dx
        self.y += dy

    def dot(self, other):
        return self.x * other.x + self.y * other.y

    def norm2(self):
        return self.dot(self)


def method_loop(iterations):
    """3 method calls per iteration in the loop body, plus the one inside norm2: 4 per turn."""
    p = Point(1.0, 2.0)  # one call of __init__, counted below
    q = Point(0.5, -0.5)
    acc = 0.0
    calls = 2
    for _ in range(iterations):
        p.move(0.001, -0.001)
        acc += p.dot(q)
        acc += q.norm2()
        calls += 4
    return acc, calls


def run(n, reps, loop):
    method_calls = 0
    checksum = 0.0
    for _ in range(reps):
        checksum += fib(n)
        acc, calls = method_loop(loop)
        checksum += acc
        method_calls += calls
    return checksum, method_calls


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=25, help="fib argument (25)")
    ap.add_argument("--reps", type=int, default=2, help="repetitions of fib + loop (2)")
    ap.add_argument("--loop", type=int, default=100_000, help="method-loop iterations (100000)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    checksum, method_calls = run(args.n, args.reps, args.loop)
    elapsed = time.perf_counter() - t0
    expected_fib = args.reps * (2 * _fib_iter(args.n + 1) - 1)
    if FIB_CALLS != expected_fib:
        print(f"fib made {FIB_CALLS} calls, expected {expected_fib}", file=sys.stderr)
        return 1
    print(f"elapsed_s {elapsed:.6f}")
    print(f"fib_calls {FIB_CALLS}")
    print(f"method_calls {method_calls}")
    print(f"calls_total {FIB_CALLS + method_calls + 1 + args.reps}")
    print(f"checksum {checksum:.6f}")
    return 0


def _fib_iter(n):
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


if __name__ == "__main__":
    sys.exit(main())
