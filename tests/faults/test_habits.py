"""How DL engineers work (issue 15): a collection window (--delay, --steps) that keeps start-up
out of the profile and counts what follows exactly; NVTX 3 ranges through sonde as NVTX's
injection library."""
import os
import textwrap
from pathlib import Path

from conftest import (calls, clean_env, notes, plain, profile_whole, prog, query, run,
                      same_behaviour, sonde_run)

HOST = prog("window_steps")
PY = "/usr/bin/python3"
PYTHONPATH = str(Path(os.environ.get("SONDE_BUILD", ".")) / "python")


def paths(db):
    return dict(query(db, "SELECT path, calls FROM callpaths"))


def test_delay_window_counts_only_what_follows(db):
    """window: --delay 0.5 drops the 5 calls before it, counts the 7 after exactly"""
    alone = plain([HOST, "delay"])
    profiled = sonde_run([HOST, "delay"], db, args=["--delay", "0.5"])
    same_behaviour(alone, profiled)
    profile_whole(db)
    # 5 dgemm in the first milliseconds, a 1.5 s sleep, then 7 sgemm.
    assert (calls(db, "cblas_dgemm"), calls(db, "cblas_sgemm")) == (0, 7)
    assert any("collection began 0.500 s" in n for n in notes(db))
    # The process's wall time is the window's: the sleep's remaining second, not the whole 1.5 s.
    wall = query(db, "SELECT wall_s FROM process_times")[0][0]
    assert 0.95 < wall < 1.45, wall


def test_steps_window_starts_at_the_step_after_n(db):
    """window: --steps 3 records steps 4-10 exactly, nothing of the set-up, no region mismatch"""
    alone = plain([HOST, "steps"])
    profiled = sonde_run([HOST, "steps"], db, args=["--steps", "3"])
    same_behaviour(alone, profiled)
    profile_whole(db)
    # "train" began before the window: neither it nor its end (after the window) is a region.
    assert paths(db) == {"step": 7, "step;forward": 7, "step;forward;cblas_sgemm": 14}
    assert calls(db, "cblas_dgemm") == 0
    assert not [n for n in notes(db) if "region ends" in n]


def test_steps_window_by_another_region_name(db):
    """window: --steps 8 --step-region forward: from the 9th forward region on"""
    profiled = sonde_run([HOST, "steps"], db, args=["--steps", "8", "--step-region", "forward"])
    same_behaviour(plain([HOST, "steps"]), profiled)
    # The 9th opens the window inside step 9 (not recorded); step 10 is recorded whole.
    assert paths(db) == {"forward": 1, "forward;cblas_sgemm": 2, "step": 1, "step;forward": 1,
                         "step;forward;cblas_sgemm": 2}


def test_window_that_never_opens_says_so(db):
    """window: --steps 20 over 10 steps: nothing measured, a note and one line saying why"""
    profiled = sonde_run([HOST, "steps"], db, args=["--steps", "20"])
    same_behaviour(plain([HOST, "steps"]), profiled)
    profile_whole(db)
    assert calls(db, "cblas_sgemm") == 0
    said = [n for n in notes(db) if "never opened" in n]
    assert said and "began 10 times" in said[0], notes(db)
    assert "opens as step 21 begins, after the 20 to skip" in said[0], said
    assert "never opened" in profiled.err
    # Nothing was measured by request: no linking problem is suggested beside it.
    assert not [n for n in notes(db) if "nothing was intercepted" in n], notes(db)
    assert "nothing was intercepted" not in profiled.err


def test_python_frames_wait_for_the_window(tmp_path, db):
    """window: python3 -m sonde --steps 2: the Python frames of steps 3-5 only"""
    host = tmp_path / "loop.py"
    host.write_text(textwrap.dedent("""\
        import sonde
        def setup():
            return sum(range(1000))
        def work(i):
            return i * 2
        setup()
        total = 0
        for i in range(5):
            with sonde.region("step"):
                total += work(i)
        print(total)
        """))
    env = clean_env(PYTHONPATH=PYTHONPATH)
    alone = run([PY, host], env=env)
    profiled = run([PY, "-m", "sonde", "-o", db, "--steps", "2", host], env=env)
    same_behaviour(alone, profiled)
    profile_whole(db)
    # The program's frames (the launcher's own exit handler aside): setup() and <module>
    # ran before the window.
    got = {p: c for p, c in paths(db).items()
           if not p.startswith(("__main__.py", "<interpreter teardown>"))}
    assert got == {"step": 3, "step;loop.py:4(work)": 3}, got
