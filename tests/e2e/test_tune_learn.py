"""sonde tune for Python scripts (python3 -m sonde tune), candidates that learn from its result
(tune.json), and the Python hook's sampled check of float arguments for subnormal values, which
the subnormals rule's estimate now comes from. Real programs, the real libsonde.so and hook."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import CLI, clean_env, query

SOURCE = os.environ.get("SONDE_SOURCE", "")
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
MLP_NUMPY = os.path.join(SOURCE, "examples", "mlp_numpy", "train.py")
TORCH_CNN = os.path.join(SOURCE, "examples", "torch_cnn", "train.py")


def py_sonde(args, timeout=300, **env):
    return subprocess.run(["/usr/bin/python3", "-m", "sonde", *args], capture_output=True,
                          text=True, timeout=timeout,
                          env=clean_env(PYTHONPATH=PYTHONPATH, **env))


def candidates(*args):
    r = subprocess.run([CLI, "candidates", "--format", "json", *map(str, args)],
                       capture_output=True, text=True, env=clean_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def stage(result, name):
    return next(s for s in result["stages"] if s["name"] == name)


def test_python_tune_mlp_numpy_and_candidates_learn(tmp_path):
    """python3 -m sonde tune on mlp_numpy --subnormal-moments: the script's options stay its own,
    every run records Python frames, tune.json is kept, and the subnormals candidate of the
    original's profile carries tune's measurement: estimated against measured, with the
    verdict that follows from the stage's."""
    out = tmp_path / "t"
    # 60 steps: 360 calls of update_core_cpu, about 11 of them checked at random (with 20 steps,
    # about 4: in one full run of the suite none of them was flagged).
    r = py_sonde(["tune", "--repeat", "2", "--stages", "ftz", "-o", str(out), "--format", "json",
                  MLP_NUMPY, "--steps", "60", "--batch", "10", "--eval-every", "10",
                  "--subnormal-moments"], OPENBLAS_NUM_THREADS=1)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["command"][:2] == ["/usr/bin/python3", MLP_NUMPY]
    assert j["command"][2:] == ["--steps", "60", "--batch", "10", "--eval-every", "10",
                                "--subnormal-moments"]
    assert json.loads((out / "tune.json").read_text())["stages"] == j["stages"]
    original, ftz = stage(j, "original"), stage(j, "ftz")
    assert ftz["rule"] == "subnormals" and ftz["status"] == "ran"
    first = original["runs"][0]["profile"]
    assert query(first, "SELECT COUNT(*) FROM hotspots WHERE routine LIKE '%(update_core_cpu)'")[0][0] == 1
    # The hook saw the subnormal moments in update_core_cpu's arguments.
    share = query(first, "SELECT value FROM run_info WHERE key = "
                         "'python.subnormal:train.py:291(update_core_cpu)'")
    assert share and 0 < float(share[0][0].split()[0]) < 1, share

    # The profile is one of the folder's runs: candidates learn from tune.json unasked.
    learnt = candidates(first)
    assert learnt["tune"] == str(out / "tune.json")
    sub = [c for c in learnt["candidates"] if c["rule"] == "subnormals"]
    assert len(sub) == 1 and sub[0]["location"] == "train.py:291(update_core_cpu)"
    assert sub[0]["est_gain_s"] > 0
    assert 0 < sub[0]["evidence"]["subnormal_share"] < 1
    m = sub[0]["measured"]
    assert m["stage"] == "ftz" and m["judged_on"] == "cpu"
    assert m["estimated_s"] == pytest.approx(ftz["estimated_gain_s"])
    assert m["measured_s"] == pytest.approx(ftz["measured_gain_s"] or 0.0)
    if ftz["verdict"] != "faster":  # --repeat 2: too few runs to tell, nothing refuted
        assert m["verdict"] == ("confirmed" if m["estimated_s"] <= 0.001 else "unmeasured"), m
    else:  # the estimate's size against the gain: within 2x, or which way it was off
        est, got = m["estimated_s"], m["measured_s"]
        assert m["verdict"] == ("underestimated" if est * 2 < got else
                                "overestimated" if est > 2 * got else "confirmed")
    text = subprocess.run([CLI, "candidates", first], capture_output=True, text=True,
                          env=clean_env(), timeout=120).stdout
    assert ("measured: estimated %.3f s, measured %.3f s by sonde tune (stage ftz, CPU time): %s"
            % (m["estimated_s"], m["measured_s"], m["verdict"])) in text

    # Another copy of the profile learns only when told where the result is.
    alone = tmp_path / "alone.db"
    shutil.copy(first, alone)
    assert "tune" not in candidates(alone)
    told = candidates("--tune", out, alone)
    assert [c.get("measured") for c in told["candidates"]] == \
        [c.get("measured") for c in learnt["candidates"]]
    bad = subprocess.run([CLI, "candidates", "--tune", str(tmp_path), str(alone)],
                         capture_output=True, text=True, env=clean_env(), timeout=60)
    assert bad.returncode == 1 and "no sonde tune result at" in bad.stderr


def test_python_tune_torch_cnn(tmp_path):
    """python3 -m sonde tune on the torch CNN (3 steps): every stage's profiles hold the Python
    frames and torch's thread count, framework-threads holds torch's pool at the cores although
    train.py calls torch.set_num_threads(1) itself, and FTZ leaves its losses alone."""
    pytest.importorskip("torch")
    out = tmp_path / "t"
    r = py_sonde(["tune", "--repeat", "1", "--stages", "framework-threads,ftz", "-o", str(out),
                  "--format", "json", TORCH_CNN, "--steps", "3", "--batch", "16",
                  "--eval-every", "0"], timeout=600)
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert [s["name"] for s in j["stages"]] == ["original", "framework-threads", "ftz"]
    if j["cores"] > 1:
        assert stage(j, "framework-threads")["status"] == "ran"
    for s in j["stages"]:
        for run in s["runs"]:
            assert run["ok"], (s["name"], run)
            assert query(run["profile"], "SELECT value FROM run_info "
                                         "WHERE key = 'torch.num_threads'"), run
            assert query(run["profile"], "SELECT COUNT(*) FROM routines WHERE kind = 'python'")[0][0] > 0
    assert stage(j, "ftz")["output_changed"] is False
    threads = {s["name"]: {query(run["profile"], "SELECT value FROM run_info "
                                                 "WHERE key = 'torch.num_threads'")[0][0]
                           for run in s["runs"]} for s in j["stages"]}
    assert threads["original"] == {"1"} and threads["ftz"] == {"1"}, threads
    if j["cores"] > 1:
        assert stage(j, "framework-threads")["knobs"]["SONDE_TORCH_THREADS"] == str(j["cores"])
        assert threads["framework-threads"] == {str(j["cores"])}, threads


def test_python_tune_usage():
    """Its own options before the script, the script's after; nothing to tune is exit 2."""
    r = py_sonde(["tune", "--repeat", "1"])
    assert r.returncode == 2 and "nothing to tune" in r.stderr
    r = py_sonde(["tune", "--help"])
    assert r.returncode == 0 and "python3 -m sonde tune" in r.stdout
    r = py_sonde(["tune", "--format", "csv", "--repeat", "1"])  # as `sonde tune` takes it
    assert r.returncode == 2 and "nothing to tune" in r.stderr, r.stderr


SUBNORMAL_PROGRAM = r"""
import numpy
def step(param, state, scale=1.0):
    return param.sum() + state["m"].sum() * scale
def plain(x):
    return x.sum()
half = numpy.ones(1000, dtype=numpy.float32)
half[::2] = 1e-39                      # every other element subnormal
state = {"m": numpy.full(3000, 1e-39, dtype=numpy.float32)}   # all of it
normal = numpy.ones((50, 40), dtype=numpy.float64)
for _ in range(400):
    step(half, state)
    plain(normal)
print("done")
"""


def test_hook_samples_subnormal_arguments(tmp_path):
    """The hook checks a sample of calls' float arrays (and a dict's values): step() gets
    1000 elements half subnormal and 3000 all subnormal, a share of 3500/4000 weighted by size;
    plain() gets normal float64 only and is not named; the program's output is its own."""
    db = tmp_path / "s.db"
    r = py_sonde(["-o", str(db), "-c", SUBNORMAL_PROGRAM])
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    rows = dict(query(db, "SELECT key, value FROM run_info WHERE key LIKE 'python.subnormal:%'"))
    # numpy's own Python-level _sum, which both call, is named too; plain() is not.
    assert "python.subnormal:<string>:3(step)" in rows, rows
    assert not any(k.endswith("(plain)") for k in rows), rows
    share, flagged, sampled = rows["python.subnormal:<string>:3(step)"].split()
    assert float(share) == pytest.approx(3500 / 4000, abs=0.01)
    # One call in 32 of ~2,000 (step, plain and numpy's _sum under them) is checked, at random:
    # step() about 12 times (fewer than 3: a 1-in-5,000 chance).
    assert int(flagged) == int(sampled) >= 3
    notes = query(db, "SELECT message FROM notes WHERE topic = 'denormals'")
    assert any("<string>:3(step)" in n for (n,) in notes), notes
    cands = candidates(db)["candidates"]
    sub = [c for c in cands if c["rule"] == "subnormals"]
    assert len(sub) == 1 and sub[0]["est_gain_s"] > 0
    # The gain per routine, from its time in the profile and its share in run_info, summed.
    expected = 0.0
    for key, value in rows.items():
        f = float(value.split()[0])
        t = query(db, "SELECT SUM(incl_s) FROM hotspots WHERE routine = ?",
                  (key[len("python.subnormal:"):],))[0][0]
        expected += t * f * 3 / (1 + 3 * f)
    assert sub[0]["est_gain_s"] == pytest.approx(expected, rel=1e-6)


# Arrays that only look subnormal: memory that held small integers, read as float64 (as
# np.empty hands out before np.ones's copyto fills it), passed to a function that only hands
# it on, to one that tests and returns it (Chainer's cuda.py from_array), and to one that fills
# it. None computes on subnormal values; compute() does, and scale() does on a share of them
# too small for a note (1 element of 1,000,128).
FILLED_PROGRAM = """\
import struct
def hand_on(dst, src, where=None):
    return (dst, src, where)
def from_array(array, device=None):
    if array is None:
        return None
    if isinstance(array, memoryview) and array.ndim == 1 and device is None:
        return array
    raise TypeError(type(array))
def fill(out):
    for i in range(len(out)):
        out[i] = 1.0
def compute(x):
    s = 0.0
    for v in x:
        s += v * 0.5
    return s
def scale(big, small):
    return small[0] * 2.0 + big[0]
junk = struct.pack("256q", *range(256))
for i in range(400):
    buf = memoryview(bytearray(junk)).cast("d")
    hand_on(buf, buf)
    from_array(buf)
    fill(buf)
tiny = memoryview(bytearray(struct.pack("256d", *[1e-310] * 256))).cast("d")
for i in range(300):
    compute(tiny)
big = memoryview(bytearray(8 * 1000000)).cast("d")
small = memoryview(bytearray(struct.pack("128d", *([1e-310] + [1.0] * 127)))).cast("d")
for i in range(300):
    scale(big, small)
print("done")
"""


def only_computed_on_is_flagged(tmp_path, python="/usr/bin/python3"):
    """An argument's subnormal-looking values count only where the call could compute on them:
    not in a function that only hands its arguments on (numpy's __array_function__
    dispatchers) or tests and returns them (Chainer's from_array), and not in an array the call
    filled; a note only for a share over 0.1 %.
    np.ones (np.empty, then copyto) in scikit-learn's code was advised FTZ/DAZ. 3.12+:
    test_python_monitoring.py."""
    db = tmp_path / "s.db"
    r = subprocess.run([python, "-m", "sonde", "-o", str(db), "-c", FILLED_PROGRAM],
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    rows = dict(query(db, "SELECT key, value FROM run_info WHERE key LIKE 'python.subnormal:%'"))
    assert sorted(rows) == ["python.subnormal:<string>:13(compute)",
                            "python.subnormal:<string>:18(scale)"], rows
    assert float(rows["python.subnormal:<string>:18(scale)"].split()[0]) < 1e-5
    # A note only where the share is one worth a word (never one that reads 0.000000).
    notes = [n for (n,) in query(db, "SELECT message FROM notes WHERE topic = 'denormals'")]
    assert len(notes) == 1 and "(compute)" in notes[0], notes


def test_arrays_only_handed_on_or_filled_are_not_subnormal_operands(tmp_path):
    only_computed_on_is_flagged(tmp_path)
