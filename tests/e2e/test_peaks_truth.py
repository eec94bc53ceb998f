"""% of peak against the peak for the threads a call really ran with, one figure everywhere:
OpenBLAS GEMMs (mlp_train) on 1 and on 2 threads, and PyTorch's oneDNN convolutions on the
threads torch runs them with, each held against the peak for that count; `sonde shapes` and
`sonde metrics` print what the gemm_shapes, routine_peaks and routine_metrics views hold."""
import json
import os
import sqlite3
import subprocess

import pytest

from conftest import CLI, MLP, clean_env, query, run

PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")

PYTHON = "/usr/bin/python3"
CONV = os.path.join(os.path.dirname(__file__), "programs", "torch_conv.py")
CORES = os.cpu_count()  # runs.cores, what peaks' threads 0 stands for
# Distinct figures per thread count, so that the wrong one shows: 1 thread, all threads.
PEAKS = {1: 10.0, CORES: 20.0}
BW = {1: 5.0, CORES: 8.0}


@pytest.fixture(scope="module")
def peaks(tmp_path_factory):
    path = tmp_path_factory.mktemp("peaks") / "peaks.txt"
    path.write_text(f"gemm.f32 1 {PEAKS[1]} manual\ngemm.f32 0 {PEAKS[CORES]} manual\n"
                    f"mem.bw 1 {BW[1]} manual\nmem.bw 0 {BW[CORES]} manual\n")
    return path


def sonde_json(*args):
    r = subprocess.run([CLI, *map(str, args), "--format", "json"], capture_output=True, text=True,
                       timeout=120, env=clean_env())
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    return doc.get("rows", doc.get("candidates", doc))  # a list's envelope (docs/cli.md)


def expected_peak(threads):
    """The nearest calibrated thread count not above `threads`."""
    below = [t for t in PEAKS if t <= threads]
    return PEAKS[max(below)] if below else None


def check_one_figure(db, threads):
    view = query(db, "SELECT routine, call_site, m, n, k, gflops, pct_peak, threads FROM gemm_shapes")
    assert view
    for routine, site, m, n, k, gflops, pct, t in view:
        assert t == threads, (routine, m, n, k, t)
        assert pct == pytest.approx(100 * gflops / expected_peak(threads), rel=1e-9)
    # `sonde shapes` prints the view's rows; `sonde metrics` the routines' figures from
    # routine_peaks.
    printed = {(r["routine"], r["call_site"], r["m"], r["n"], r["k"]): r["pct_peak"]
               for r in sonde_json("shapes", db)}
    assert printed == {(r, s, m, n, k): pct for r, s, m, n, k, _, pct, _ in view}
    per_routine = dict(query(db, "SELECT routine, pct_peak FROM routine_peaks"))
    printed = sonde_json("metrics", db, "--section", "roofline")["roofline"]
    roofline = {r["routine"]: r for r in printed}
    for routine, pct in per_routine.items():
        assert roofline[routine]["pct_peak"] == pytest.approx(pct, rel=1e-12)
    # Every figure of the roofline section is routine_metrics' (the routines with FLOPs).
    columns = ["gflops", "pct_peak", "intensity", "attainable_gflops", "bound"]
    held = {row[0]: dict(zip(columns, row[1:])) for row in query(
        db, f"SELECT routine_id, {', '.join(columns)} FROM routine_metrics WHERE flops > 0")}
    assert len(held) == len(printed)
    for r in printed:
        for column in columns:
            want = held[r["routine_id"]][column]
            assert r[column] == (want if want is None or column == "bound"
                                 else pytest.approx(want, rel=1e-12)), (r["routine"], column)
    assert any(h["bound"] for h in held.values())  # the peaks above give every ceiling


@pytest.mark.parametrize("blas_threads", sorted({1, CORES}))
def test_openblas_gemms_against_the_peak_for_their_threads(tmp_path, peaks, blas_threads):
    if not MLP:
        pytest.skip("SONDE_MLP not set")
    db = tmp_path / "prof.db"
    r = run([MLP, "--steps", 10], db, SONDE_PEAKS=peaks, OPENBLAS_NUM_THREADS=blas_threads)
    assert r.returncode == 0, r.stderr
    check_one_figure(db, blas_threads)
    # A routine without shapes (sgemv) is held against the process's BLAS thread count.
    [(gemv_threads,)] = query(db, "SELECT value FROM run_info WHERE key = 'blas.threads'")
    assert int(gemv_threads) == blas_threads


def torch_threads():
    probe = subprocess.run([PYTHON, "-c", "import torch; print(torch.get_num_threads(), "
                                          "torch.backends.mkldnn.is_available())"],
                           capture_output=True, text=True, env=clean_env())
    if probe.returncode != 0 or not probe.stdout.strip().endswith("True"):
        pytest.skip("Debian's python3-torch with oneDNN not installed")
    return int(probe.stdout.split()[0])


def test_onednn_convolutions_against_the_peak_for_torchs_threads(tmp_path, peaks):
    """The defect: torch ran oneDNN on 1 thread here and its convolutions were reported against
    the all-threads peak (54 % instead of about 100 %)."""
    threads = torch_threads()
    db = tmp_path / "prof.db"
    r = run([PYTHON, CONV], db, SONDE_PEAKS=peaks)
    assert r.returncode == 0, r.stderr
    if not query(db, "SELECT 1 FROM shapes s JOIN nodes n USING (node_id) JOIN routines r "
                     "USING (routine_id) WHERE r.kind = 'onednn'"):
        pytest.skip("libsonde was built without the oneDNN headers (libdnnl-dev)")
    check_one_figure(db, threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_torchs_thread_count_is_recorded_and_agrees_with_onednns(tmp_path, peaks, threads):
    """Under `python3 -m sonde`, the Python hook records torch.get_num_threads() of a program
    that imported torch (run_info torch.num_threads; sonde imports no torch itself): the count
    the peaks views use for oneDNN work whose runtime cannot say. With Debian's OpenMP oneDNN
    each call says, and both sources must agree with torch.set_num_threads."""
    torch_threads()
    db = tmp_path / "prof.db"
    r = subprocess.run([PYTHON, "-m", "sonde", "-o", str(db), CONV, str(threads)],
                       capture_output=True, text=True, timeout=300,
                       env=clean_env(PYTHONPATH=PYTHONPATH, SONDE_PEAKS=str(peaks)))
    assert r.returncode == 0, r.stderr
    assert query(db, "SELECT value FROM run_info WHERE key = 'torch.num_threads'") == \
        [(str(threads),)]
    recorded = query(db, "SELECT DISTINCT s.threads FROM shapes s JOIN nodes n USING (node_id) "
                         "JOIN routines r USING (routine_id) WHERE r.kind = 'onednn'")
    if not recorded:
        pytest.skip("libsonde was built without the oneDNN headers (libdnnl-dev)")
    assert recorded == [(threads,)]
    check_one_figure(db, threads)
    # The fallback itself, on this real file: a oneDNN build that cannot say its count (NULL)
    # is held against the peak for torch's.
    with sqlite3.connect(db) as c:
        c.execute("UPDATE shapes SET threads = NULL WHERE node_id IN (SELECT node_id FROM nodes "
                  "JOIN routines USING (routine_id) WHERE kind = 'onednn')")
    check_one_figure(db, threads)


def test_a_program_without_torch_records_no_torch_count(tmp_path):
    script = tmp_path / "plain.py"
    script.write_text("import sys\nprint(sum(range(10)), 'torch' in sys.modules)\n")
    db = tmp_path / "prof.db"
    r = subprocess.run([PYTHON, "-m", "sonde", "-o", str(db), script], capture_output=True,
                       text=True, timeout=120, env=clean_env(PYTHONPATH=PYTHONPATH))
    assert r.returncode == 0, r.stderr
    assert r.stdout == "45 False\n"  # and sonde did not import it
    assert query(db, "SELECT value FROM run_info WHERE key = 'torch.num_threads'") == []
