"""What every check of the device kit shares: where sonde and the programs are (check.sh says, in
the environment), running a command plain or under sonde, reading a profile, and a result."""
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

CLI = os.environ["SONDE_KIT_CLI"]
SONDE_PYTHONPATH = os.environ["SONDE_KIT_PYTHONPATH"]
PROGRAM = os.environ["SONDE_KIT_PROGRAM"]
WORK = Path(os.environ["SONDE_KIT_WORK"])
KIT = Path(__file__).resolve().parent
# The interpreter of the PyTorch runs: this one on a GPU machine; in a rehearsal the machine's
# own (check.sh names it where it imports torch), the fresh venv having none.
TORCH_PYTHON = os.environ.get("SONDE_KIT_TORCH_PYTHON") or sys.executable

PASS, FAIL, NOT_RUN = "PASS", "FAIL", "NOT RUN"
NEEDS_GPU = "rehearsal: not run (needs a GPU)"
# When the kit must stop (time.time()), from run_checks.py --budget; None: no limit.
DEADLINE = None


def time_left():
    return float("inf") if DEADLINE is None else DEADLINE - time.time()


@dataclass
class Result:
    name: str
    status: str
    detail: str = ""
    figures: dict = field(default_factory=dict)
    expected_fail: str = ""  # why this check is known to fail today (it still counts as FAIL)


def verdict(name, failures, figures=None, expected_fail=""):
    """PASS when `failures` (strings) is empty; else FAIL saying the first few."""
    detail = "; ".join(failures[:4]) + (f" (+{len(failures) - 4} more)" if len(failures) > 4 else "")
    figures = dict(figures or {})
    if len(failures) > 4:  # all of them in summary.json: a GPU run is too dear to repeat for them
        figures["failures"] = failures[:80]
    return Result(name, FAIL if failures else PASS, detail, figures, expected_fail)


def run(cmd, log, timeout=240, **env):
    """Runs cmd, its output appended to `log`; returns (CompletedProcess, wall seconds). A command
    still running after `timeout` seconds is killed and reads as exit 124."""
    e = dict(os.environ, **{k: str(v) for k, v in env.items()})
    timeout = max(1, min(timeout, time_left()))
    t = time.perf_counter()
    try:
        r = subprocess.run([str(c) for c in cmd], env=e, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as x:
        # A hung command fails its check, not the kit: the checks after it still run in the
        # device time that is left.
        text = lambda b: b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        r = subprocess.CompletedProcess(x.cmd, 124, text(x.stdout),
                                        text(x.stderr) + f"\n(killed after {timeout} s)")
    wall = time.perf_counter() - t
    with open(log, "a") as f:
        f.write(f"$ {' '.join(map(str, cmd))}\n-> {r.returncode} in {wall:.2f} s\n")
        f.write(r.stdout[-20000:] + r.stderr[-20000:] + "\n")
    return r, wall


def under_sonde(cmd, db, log, **env):
    """A program under `sonde run`."""
    return run([CLI, "run", "--force", "-o", db, "--", *cmd], log, **env)


def python_under_sonde(script_args, db, log, launch=(), **env):
    """A Python script under `python3 -m sonde [launch options]`, from the installed package
    (the in-process launch unless `launch` says --re-exec)."""
    path = SONDE_PYTHONPATH + (os.pathsep + env.pop("PYTHONPATH") if "PYTHONPATH" in env else "")
    return run([TORCH_PYTHON, "-m", "sonde", *launch, "-o", db, *script_args], log,
               PYTHONPATH=path, **env)


def query(db, sql, params=()):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def run_info(db, key):
    rows = query(db, "SELECT value FROM run_info WHERE key = ?", (key,))
    return rows[0][0] if rows else None


def kernel_rows(db):
    """(kernel name, launching call path or None, start_ns, end_ns) for every kernel record."""
    return query(db, "SELECT g.name, p.path, g.start_ns, g.end_ns FROM gpu_activity g "
                     "LEFT JOIN node_paths p USING (node_id) WHERE g.kind = 'kernel' "
                     "ORDER BY g.start_ns")


def autograd_kernel_rows(db):
    """(kernel name, call path) of every kernel record launched by PyTorch's autograd device
    threads (pt_autograd_N: backward on CUDA runs there, not on the thread that called it)."""
    return query(db, "SELECT g.name, p.path FROM gpu_activity g JOIN nodes n USING (node_id) "
                     "JOIN threads t USING (thread_id) LEFT JOIN node_paths p USING (node_id) "
                     "WHERE g.kind = 'kernel' AND t.name LIKE 'pt\\_autograd\\_%' ESCAPE '\\'")


def operator_rows(db):
    """(operator name, call path, thread name, calls) of every node of kind `torch`."""
    return query(db, "SELECT r.name, p.path, t.name, n.calls FROM nodes n JOIN routines r "
                     "USING (routine_id) JOIN node_paths p USING (node_id) JOIN threads t "
                     "USING (thread_id) WHERE r.kind = 'torch'")


def graph_origin_rows(db):
    """(kernel name, capture path, replaying path, records) of every CUDA graph replay whose
    graph nodes' origin is known (the gpu_graph_kernels view)."""
    return query(db, "SELECT name, origin_path, call_path, records FROM gpu_graph_kernels "
                     "WHERE kind = 'kernel' ORDER BY name, origin_path")
