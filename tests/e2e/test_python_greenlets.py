"""Greenlets (greenlet, gevent): many Python call stacks on one thread, switched in the middle of
frames. Each greenlet's frames form a call stack of their own under the thread's root, charged
only the time that greenlet ran, with exact call counts, and the program runs as without sonde
(a tracer of its own still sees every switch)."""
import pytest

from conftest import query
from test_python import MODES, plain_py, python_calls, script, sonde_py, tree_is_consistent

pytest.importorskip("greenlet")

# Three greenlets take turns with the main one; each burns a known share of CPU between
# switches and measures the time it ran itself (perf_counter around each turn), which is the
# reference for sonde's inclusive times.
TURNS = """
    import json, time, greenlet

    ran = {}
    calls = {"work": 0, "run_one": 0, "main_loop": 0, "switch_to": 0}  # counted by each

    def spin(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def work(name, turns, seconds):
        calls["work"] += 1
        for _ in range(turns):
            t = time.perf_counter()
            spin(seconds)
            ran[name] = ran.get(name, 0) + time.perf_counter() - t
            main.switch()
        return name

    def run_one(name, turns, seconds):
        calls["run_one"] += 1
        return work(name, turns, seconds)

    def main_loop():
        calls["main_loop"] += 1
        # main_loop's own running time: from each return of a switch to the next switch.
        resumed = time.perf_counter()
        def switch_to(g, *args):
            nonlocal resumed
            calls["switch_to"] += 1
            ran["main"] = ran.get("main", 0) + time.perf_counter() - resumed
            g.switch(*args)
            resumed = time.perf_counter()

        alive = [greenlet.greenlet(run_one) for _ in range(3)]
        args = {g: (f"g{i}", 4 + i, 0.01) for i, g in enumerate(alive)}
        first = set(alive)
        while alive:
            for g in list(alive):
                switch_to(g, *(args[g] if g in first else ()))
                first.discard(g)
                if g.dead:
                    alive.remove(g)
            spin(0.01)
        ran["main"] += time.perf_counter() - resumed

    main = greenlet.getcurrent()
    main_loop()
    # A greenlet left suspended and dropped: greenlet kills it (GreenletExit) when it is freed.
    left = greenlet.greenlet(run_one)
    left.switch("left", 100, 0.001)
    del left
    print(json.dumps({"calls": calls, "ran": ran}))
"""


def paths_of(db, function):
    return [p for (p,) in query(db, "SELECT path FROM callpaths WHERE path LIKE ?",
                                (f"%({function})",))]


def incl_s(db, function):
    return query(db, "SELECT COALESCE(SUM(n.incl_ns), 0) FROM nodes n JOIN routines r "
                     "USING (routine_id) WHERE r.kind = 'python' AND r.name LIKE ?",
                 (f"%({function})",))[0][0] / 1e9


@pytest.mark.parametrize("mode", MODES)
def test_each_greenlet_is_a_stack_of_its_own_charged_the_time_it_ran(db, tmp_path, mode):
    import json
    path = script(tmp_path, "turns.py", TURNS)
    r = sonde_py([path], db, tmp_path, mode=mode)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    for function, n in out["calls"].items():
        assert python_calls(db, function) == n, function
    # Every greenlet's frames start at the thread's root: run_one is never under main_loop,
    # and work never under another work.
    for p in paths_of(db, "work"):
        frames = p.split(";")
        assert frames[0].endswith("(run_one)"), p
        assert sum(f.endswith("(work)") for f in frames) == 1, p
    assert all("main_loop" not in p for p in paths_of(db, "run_one"))
    # Times: work spun 0.04 + 0.05 + 0.06 s (and the dropped greenlet 1 ms), main_loop 6
    # turns of 10 ms; switched out, neither is charged the other's time. The program's own
    # clock is the reference: a turn preempted on a loaded machine is longer for both.
    work_ran = sum(v for k, v in out["ran"].items() if k.startswith("g") or k == "left")
    assert incl_s(db, "work") == pytest.approx(work_ran, rel=0.1)
    assert incl_s(db, "main_loop") == pytest.approx(out["ran"]["main"], rel=0.1, abs=0.005)
    assert incl_s(db, "main_loop") < 0.6 * work_ran
    assert tree_is_consistent(db)


@pytest.mark.parametrize("mode", MODES)
def test_a_tracer_of_the_programs_own_sees_every_switch_under_sonde(db, tmp_path, mode):
    path = script(tmp_path, "tracer.py", """
        import greenlet

        seen = []

        def tracer(event, args):
            origin, target = args
            seen.append((event, names.get(origin, "?"), names.get(target, "?")))

        def child():
            greenlet.getcurrent().parent.switch(1)
            raise KeyError("thrown")

        main = greenlet.getcurrent()
        g = greenlet.greenlet(child)
        names = {main: "main", g: "g"}
        greenlet.settrace(tracer)
        g.switch()
        try:
            g.switch()
        except KeyError:
            pass
        greenlet.settrace(None)
        print(seen, g.dead)
    """)
    r = sonde_py([path], db, tmp_path, mode=mode)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain_py([path], tmp_path).stdout
    assert python_calls(db, "child") == 1


@pytest.mark.parametrize("mode", MODES)
def test_gevent_jobs_show_their_blas_calls_under_the_job(db, tmp_path, mode):
    pytest.importorskip("gevent")
    path = script(tmp_path, "jobs.py", """
        import gevent
        import numpy as np

        def job(i):
            a = np.ones((64, 64), dtype=np.float32)
            for _ in range(20):
                a = a @ a / 64
                gevent.sleep(0)
            return float(a.sum())

        jobs = [gevent.spawn(job, i) for i in range(8)]
        gevent.joinall(jobs)
        print(sum(j.value for j in jobs))
    """)
    r = sonde_py([path], db, tmp_path, mode=mode)
    assert r.returncode == 0, r.stderr
    assert r.stdout == plain_py([path], tmp_path).stdout
    assert python_calls(db, "job") == 8
    gemm = query(db, "SELECT path, calls FROM callpaths WHERE path LIKE '%cblas_sgemm'")
    assert sum(calls for _, calls in gemm) == 160
    # Each job's stack starts at the thread's root (gevent's Greenlet.run is compiled code).
    for p, _ in gemm:
        assert p.split(";")[0].endswith("(job)"), p
    assert tree_is_consistent(db)
