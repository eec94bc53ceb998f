"""Cells of the iteration breakdown: a training run killed inside its loop still gives a
breakdown whose iterations are the steps it took (the file the signal flush wrote)."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import CLI, PYTHON, clean_env, profile_whole

TORCH_TRAIN = Path(__file__).resolve().parent.parent / "e2e" / "programs" / "torch_train.py"


def breakdown(db):
    r = subprocess.run([CLI, "metrics", db, "--section", "breakdown", "--format", "json"],
                       capture_output=True, text=True, timeout=60, env=clean_env())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["breakdown"]


def test_killed_in_the_loop(db):
    """PyTorch loop killed by SIGTERM mid-run: breakdown counts the steps taken"""
    env = clean_env(OPENBLAS_NUM_THREADS=1,
                    PYTHONPATH=os.path.join(os.environ.get("SONDE_BUILD", ""), "python"))
    p = subprocess.Popen([PYTHON, "-m", "sonde", "-o", db, str(TORCH_TRAIN), "--steps", "100000",
                          "--style", "function", "--progress"], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    lines = []
    deadline = time.monotonic() + 60
    try:
        while len(lines) < 30 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=60)
        rest = p.stdout.read()  # what readline() buffered too (communicate() would skip it)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == -signal.SIGTERM, p.returncode
    steps = len(lines) + len(rest.splitlines())
    assert steps >= 30
    profile_whole(db)
    b = breakdown(db)
    # The step in flight when the signal came may have stepped its optimizer before its line.
    assert b["iterations"] in (steps, steps + 1), (b["iterations"], steps)
    assert b["found"], b["reason"]
    assert b["body"].endswith("(train_step)")
    by = {r["phase"]: r for r in b["phases"]}
    assert all(by[ph]["time_s"] > 0 for ph in ("t_f", "t_b", "t_u")), by
