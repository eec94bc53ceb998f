"""A run shaped like a DataLoader's (benchmark input of run_benchmarks.py's section 5c): a parent
forking workers one after another from inside its own calls (each child's inherited frames), each
child with a helper thread waiting on an event while the child's first thread walks a few hundred
distinct call paths, then joins it (the waits the views take out of the 100 %)."""
import os
import sys
import threading

FUNCS = 8


# Each its own code object (a closure's copies would be one routine, one call path).
for i in range(FUNCS):
    exec(f"def f{i}(depth):\n    if depth:\n        for g in fns:\n            g(depth - 1)\n")
fns = [globals()[f"f{i}"] for i in range(FUNCS)]


def child(depth):
    done = threading.Event()
    helper = threading.Thread(target=done.wait)
    helper.start()
    for g in fns:
        g(depth)
    done.set()
    helper.join()


def start_worker(depth):
    pid = os.fork()
    if pid == 0:
        child(depth)
        os._exit(0)
    return pid


def main():
    workers, depth = int(sys.argv[1]), int(sys.argv[2])
    for _ in range(workers):
        _, status = os.waitpid(start_worker(depth), 0)
        if status:
            sys.exit(f"a worker ended with status {status}")


if __name__ == "__main__":
    main()
