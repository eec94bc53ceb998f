"""A fork child's start under a parent of many call paths (docs/performance.md "A fork child").

The parent calls N distinct functions (N call paths under the Python hook), then forks K
children one after another; each child reports, as its first act, the page copies it made since
the fork (minor faults: every page it wrote that the parent had) and the time from the parent's
fork() to that line, then exits. Printed: one "child MINFLT MS" line per child.

  python3 py_fork_child.py N K
"""
import os
import resource
import sys
import time

N, K = int(sys.argv[1]), int(sys.argv[2])
namespace = {}
exec(compile("\n".join(f"def f{i}():\n    return {i}\n" for i in range(N)), "paths.py", "exec"),
     namespace)
functions = [namespace[f"f{i}"] for i in range(N)]


def call_each():
    return sum(f() for f in functions)


assert call_each() == N * (N - 1) // 2
# As a DataLoader starts its workers: one fork after another, none waited for before the next.
children = []
for _ in range(K):
    r, w = os.pipe()
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        ms = (time.perf_counter() - t0) * 1e3
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        os.write(w, f"child {faults} {ms:.2f}\n".encode())
        os._exit(0)
    os.close(w)
    children.append((pid, r))
for pid, r in children:
    line = os.read(r, 100).decode()
    os.close(r)
    os.waitpid(pid, 0)
    print(line, end="", flush=True)
