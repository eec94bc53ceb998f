"""The iteration breakdown in device time, without a GPU: cupti_app's breakdown mode drives the
stub libcupti (tests/stubs/cupti) through 4 training steps whose copies and kernels run at known
device times (ms from each step's start): the batch's host-to-device copy [0, 1], forward
[1, 4], backward [4, 9] and [8, 10] on two streams, two NCCL kernels launched from backward
[7, 11] and [10.5, 11.5], update [11, 12]; the host then waits for the device. The device-time
phases and the communication/compute overlap must come out exactly.

What the stub assumes: it delivers each kernel's record with the start and end it is given (on
its clock, an hour off CLOCK_REALTIME, which sonde converts by one offset per flush: durations
are exact, and with one flush the intervals' places relative to each other too),
every record on device 0, and the kernel's name mangled as CUPTI gives it."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import BIN, CLI, clean_env, query, run

STUBS = os.environ.get("SONDE_CUPTI_STUBS", "")
pytestmark = pytest.mark.skipif(
    not STUBS, reason="CUPTI headers absent at configure time: no CUPTI backend, no stub")

STEPS = 4
MS = 1_000_000
# Device ms per step, by phase.
PER_STEP = {"t_h2d": 1.0, "t_f": 3.0, "t_b": 5.0 + 2.0, "t_comm": 4.0 + 1.0, "t_u": 1.0,
            "t_io": 0.0}
# Per step: NCCL kernels' union [7, 11.5]; compute kernels' union [1, 10] and [11, 12];
# communication under compute [7, 10] and [11, 11.5].
COMM_UNION, COMPUTE_UNION, OVERLAP = 4.5, 10.0, 3.5


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    db = tmp_path_factory.mktemp("gpu_breakdown") / "prof.db"
    # One flush, at exit: every record is moved to sonde's time base by the same offset, so
    # the intervals keep their exact places relative to each other.
    r = run([BIN / "cupti_app", "breakdown"], db=db, SONDE_FLUSH_INTERVAL=0,
            SONDE_CUPTI_LIBRARY=str(Path(STUBS) / "libcupti.so.13"),
            LD_LIBRARY_PATH=str(Path(STUBS) / "driver"))
    assert r.returncode == 0, r.stderr
    assert "done breakdown" in r.stdout
    return db


def metrics(db, fmt="json"):
    r = subprocess.run([CLI, "metrics", str(db), "--section", "breakdown", "--format", fmt],
                       capture_output=True, text=True, timeout=120, env=clean_env())
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["breakdown"] if fmt == "json" else r.stdout


def test_the_stub_delivered_every_record(profile):
    rows = query(profile, "SELECT work, COUNT(*), SUM(ns) FROM gpu_work GROUP BY work")
    assert sorted(rows) == [("compute", 4 * STEPS, 11 * MS * STEPS),
                            ("h2d", STEPS, MS * STEPS),
                            ("nccl", 2 * STEPS, 5 * MS * STEPS)]


def test_each_phase_has_the_device_time_launched_in_it(profile):
    b = metrics(profile)
    assert b["found"] and b["gpu"]
    assert b["iterations"] == STEPS
    by = {p["phase"]: p for p in b["phases"]}
    for phase, ms in PER_STEP.items():
        assert by[phase]["gpu_s"] == pytest.approx(ms * STEPS / 1e3, abs=1e-12), phase
        assert by[phase]["gpu_ms_per_iter"] == pytest.approx(ms, abs=1e-9), phase
    for row in ("other", "outside", "unmeasured"):
        assert by[row]["gpu_s"] == 0, row
    # The host's forward is one launch; its device time is the kernel's 3 ms.
    assert by["t_f"]["time_s"] < by["t_f"]["gpu_s"]


def test_overlap_is_the_intersection_of_unions_per_device(profile):
    b = metrics(profile)
    [o] = b["gpu_overlap"]
    assert o["device"] == 0
    assert o["comm_s"] == pytest.approx(COMM_UNION * STEPS / 1e3, abs=1e-12)
    assert o["compute_s"] == pytest.approx(COMPUTE_UNION * STEPS / 1e3, abs=1e-12)
    assert o["overlap_s"] == pytest.approx(OVERLAP * STEPS / 1e3, abs=1e-12)
    assert o["overlap_pct"] == pytest.approx(100 * OVERLAP / COMM_UNION)
    assert o["overlap_ms_per_iter"] == pytest.approx(OVERLAP)
    assert o["exposed_ms_per_iter"] == pytest.approx(COMM_UNION - OVERLAP)


def test_text_shows_device_time_beside_host_time(profile):
    out = metrics(profile, "text")
    assert "gpu_s" in out and "gpu ms/iter" in out
    assert "GPU communication/compute overlap per device" in out
    t_b = next(line for line in out.splitlines() if line.startswith("t_b"))
    assert "7.000" in t_b  # ms per iteration on the device
