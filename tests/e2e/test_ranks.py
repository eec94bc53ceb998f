"""sonde merge, ranks and scaling on per-rank profiles written by the real library: known_time
(a region 'sleep' of a known length) run once per rank, with the launcher's variables an mpirun
sets (OMPI_COMM_WORLD_RANK/SIZE, PMIX_NAMESPACE) given by hand."""
import csv
import io
import json
import subprocess
import time
import uuid

import pytest

from conftest import BIN, CLI, LIB, clean_env, integrity_ok, query, run, sonde


def rank_files(tmp_path, sleeps_ms, job=None, name="run", slept=None):
    """One profile per rank, rank r sleeping sleeps_ms[r] inside the region 'sleep'. Each rank
    writes into its own folder (a ranked output may be renamed prof.rank<R>.db). `slept`, a
    list, receives each rank's (low, high) bounds in seconds of its region's time as the
    program measured them: the nanosleep inside it, and the region's calls from outside."""
    job = job or f"test-{uuid.uuid4()}"
    files = []
    for rank, ms in enumerate(sleeps_ms):
        d = tmp_path / f"{name}.r{rank}"
        d.mkdir()
        p = run([BIN / "known_time", 3, 100, ms], db=d / "prof.db", OMPI_COMM_WORLD_RANK=rank,
                OMPI_COMM_WORLD_SIZE=len(sleeps_ms), PMIX_NAMESPACE=job)
        assert p.returncode == 0, p.stderr
        if slept is not None:
            measured = dict(line.split() for line in p.stdout.splitlines()[1:])
            slept.append((float(measured["sleep_us"]) / 1e6,
                          float(measured["sleep_region_us"]) / 1e6))
        (written,) = d.glob("*.db")
        files.append(written)
    return files


def merge(out, files, *extra):
    return sonde("merge", "-o", out, *files, *extra)


def test_merge_holds_every_rank_and_the_views_read_it(tmp_path):
    files = rank_files(tmp_path, [60, 60, 60, 60])
    out = tmp_path / "run.db"
    p = merge(out, files)
    assert p.returncode == 0, p.stderr
    assert "merged 4 files (4 ranks, 4 processes" in p.stdout
    assert "\r" not in p.stderr  # no progress bar when stderr is not a terminal
    assert integrity_ok(out)
    assert query(out, "SELECT rank FROM processes ORDER BY rank") == [(0,), (1,), (2,), (3,)]
    nodes_in = sum(query(f, "SELECT COUNT(*) FROM nodes")[0][0] for f in files)
    assert query(out, "SELECT COUNT(*) FROM nodes") == [(nodes_in,)]
    # Every node's parent and thread are the ones its input gave it, shifted.
    assert query(out, "SELECT COUNT(*) FROM nodes c JOIN nodes p ON p.node_id = c.parent_id "
                      "WHERE p.thread_id <> c.thread_id") == [(0,)]
    assert query(out, "SELECT calls FROM hotspots WHERE routine = 'cblas_dgemm'") == [(12,)]
    assert query(out, "SELECT COUNT(*) FROM routines WHERE name = 'sleep'") == [(1,)]
    assert query(out, "SELECT rank, calls FROM rank_hotspots WHERE routine = 'cblas_dgemm' "
                      "ORDER BY rank") == [(r, 3) for r in range(4)]
    assert query(out, "SELECT path, calls FROM callpaths WHERE path = 'compute;cblas_dgemm'") == \
        [("compute;cblas_dgemm", 12)]
    for cmd in (["report"], ["tree"], ["shapes"], ["metrics"], ["candidates"]):
        p = sonde(*cmd, out)
        assert p.returncode == 0, (cmd, p.stderr)
    p = sonde("report", out, "--rank", 2, "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)["rows"]}
    assert rows["cblas_dgemm"]["calls"] == 3


def test_slowest_rank_and_its_max_over_mean(tmp_path):
    sleeps = [80, 80, 240, 80]
    out = tmp_path / "run.db"
    slept = []
    assert merge(out, rank_files(tmp_path, sleeps, slept=slept)).returncode == 0
    (row,) = query(out, "SELECT slowest_rank, max_over_mean, max_s, mean_s, ranks "
                        "FROM rank_imbalance WHERE routine = 'sleep'")
    slowest, max_over_mean, max_s, mean_s, ranks = row
    assert slowest == 2 and ranks == 4
    # A loaded machine oversleeps each nanosleep by its own amount (tens of ms at load 13): the
    # known answer is what each rank measured, 240 / 120 = 2 on an idle machine.
    lo, hi = span(max, slept), span(lambda s: sum(s) / len(s), slept)
    assert lo[0] <= max_s <= lo[1], (max_s, slept)
    assert hi[0] <= mean_s <= hi[1], (mean_s, slept)
    assert lo[0] / hi[1] <= max_over_mean <= lo[1] / hi[0], (max_over_mean, slept)
    p = sonde("ranks", out, "--format", "json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["ranks"] == 4
    first = report["imbalance"][0]  # the most time lost
    assert first["routine"] == "sleep" and first["slowest_rank"] == 2
    assert first["max_over_mean"] == pytest.approx(max_over_mean)
    text = sonde("ranks", out).stdout
    assert "Load imbalance" in text and "sleep" in text
    p = sonde("candidates", out, "--format", "json")
    assert p.returncode == 0, p.stderr
    found = [c for c in json.loads(p.stdout)["candidates"] if c["rule"] == "rank-imbalance"]
    assert found and found[0]["location"] == "sleep [region]"
    evidence = found[0]["evidence"]
    assert evidence["slowest_rank"] == 2
    assert found[0]["est_gain_s"] == pytest.approx(max_s - mean_s)


def test_refuses_files_of_different_runs_unless_forced(tmp_path):
    a = rank_files(tmp_path, [20], name="a")
    b = rank_files(tmp_path, [20, 20], name="b")[1:]  # rank 1 of another job
    out = tmp_path / "run.db"
    p = merge(out, a + b)
    assert p.returncode == 1
    assert "not of the same run" in p.stderr and len(p.stderr.splitlines()) == 1
    assert not out.exists() and not list(tmp_path.glob("run.db.merging*"))
    assert merge(out, a + b, "--force").returncode == 0
    assert query(out, "SELECT COUNT(*) FROM processes") == [(2,)]
    # An existing output is kept unless --force.
    p = merge(out, a)
    assert p.returncode == 1 and "exists" in p.stderr
    assert query(out, "SELECT COUNT(*) FROM processes") == [(2,)]
    # One rank twice (or one file twice) is not one run either.
    job = "test-same-job"
    c = rank_files(tmp_path, [20], job=job, name="c")
    d = rank_files(tmp_path, [20], job=job, name="d")
    p = merge(tmp_path / "twice.db", c + d)
    assert p.returncode == 1 and "both hold rank 0" in p.stderr
    p = merge(tmp_path / "same.db", c + c)
    assert p.returncode == 2 and "given twice" in p.stderr


def test_merge_leaves_out_a_rank_killed_before_its_first_flush(tmp_path):
    # A rank SIGKILLed before its first flush leaves the blank profile it claimed: "holds no
    # run" refused the whole merge, the other ranks' data unreadable together (a red team's).
    files = rank_files(tmp_path, [20, 20])
    killed = tmp_path / "run.r1" / "prof.rank1.db"
    files[1].unlink()
    e = clean_env(LD_PRELOAD=LIB, SONDE_OUTPUT=str(killed), SONDE_FLUSH_INTERVAL="0",
                  OMPI_COMM_WORLD_RANK="1", OMPI_COMM_WORLD_SIZE="2")
    p = subprocess.Popen(["sleep", "30"], env=e)
    try:
        for _ in range(500):  # claimed at its start, written at its first flush (none here)
            if killed.exists():
                break
            time.sleep(0.01)
    finally:
        p.kill()
        p.wait()
    assert killed.exists() and query(killed, "SELECT COUNT(*) FROM runs") == [(0,)]
    out = tmp_path / "run.db"
    r = merge(out, [files[0], killed])
    assert r.returncode == 0, r.stderr
    assert f"sonde merge: {killed} left out: it holds no run" in r.stderr, r.stderr
    assert "the run had 2 ranks and 1 are in" in r.stderr, r.stderr
    assert query(out, "SELECT rank FROM processes") == [(0,)]
    # The merged file says so too: `sonde ranks` told the user to merge the other ranks' files.
    (note,), = query(out, "SELECT message FROM notes WHERE topic = 'merge-left-out'")
    assert note.startswith(f"{killed} was left out of this merge: it held no run"), note
    ranks = sonde("ranks", out)
    assert ranks.stdout.startswith("1 rank of the run's 2 (the others are not in this merged "
                                   f"file)\nnote: {note}\n"), ranks.stdout
    alone = merge(tmp_path / "none.db", [killed])
    assert alone.returncode == 1 and "no input holds a run" in alone.stderr, alone.stderr
    assert not (tmp_path / "none.db").exists()


def test_merge_reads_a_directory_and_merged_files(tmp_path):
    files = rank_files(tmp_path, [20, 20, 20, 20])
    d = tmp_path / "ranks"
    d.mkdir()
    for r, f in enumerate(files):
        f.rename(d / f"prof.rank{r}.db")
    half = [tmp_path / "h0.db", tmp_path / "h1.db"]
    assert merge(half[0], [d / "prof.rank0.db", d / "prof.rank1.db"]).returncode == 0
    assert merge(half[1], [d / "prof.rank2.db", d / "prof.rank3.db"]).returncode == 0
    tree = tmp_path / "tree.db"
    assert merge(tree, half).returncode == 0  # a reduction tree: merged files merge again
    # `sonde run -o prof.db -- mpirun ...` leaves the launcher's own profile beside the ranks':
    # its processes have no rank, and read as rank 0 it made the directory's merge fail.
    assert run([BIN / "known_time", 1, 1, 1], db=d / "prof.db").returncode == 0
    flat = tmp_path / "flat.db"
    p = merge(flat, [d])
    assert p.returncode == 0, p.stderr
    assert p.stderr == f"sonde merge: {d / 'prof.db'} left out: not a rank's file " \
                       "(prof.rank<R>.db); given by name, it is merged too\n"
    sql = ("SELECT rank, routine, calls, round(incl_s, 9) FROM rank_hotspots "
           "ORDER BY rank, routine")
    assert query(tree, sql) == query(flat, sql)
    assert query(flat, "SELECT rank FROM processes ORDER BY process_id") == \
        [(0,), (1,), (2,), (3,)]


def span(f, slept):
    """(low, high) of f over the ranks' region times, each within its measured bounds (f rises
    with each argument: max, mean), widened by 0.2 % for the TSC against CLOCK_MONOTONIC."""
    return (f([lo for lo, _ in slept]) * 0.998, f([hi for _, hi in slept]) * 1.002)


def efficiency_bounds(ref, other, weak):
    """The efficiency % sonde must find for two runs given as their ranks' measured bounds: the
    run's time is its slowest rank's, the reference is `ref` (fewest workers)."""
    (t0_lo, t0_hi), (t1_lo, t1_hi) = span(max, ref), span(max, other)
    workers = 1.0 if weak else len(ref) / len(other)
    return 100 * workers * t0_lo / t1_hi, 100 * workers * t0_hi / t1_lo


def scaling(files, *extra):
    p = sonde("scaling", *files, "--format", "json", "-n", 0, *extra)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def sleep_efficiency(result):
    (row,) = [r for r in result["routines"] if r["routine"] == "sleep"]
    return row["efficiency_pct"]


def scaled_runs(tmp_path, shape, prefix):
    """Merged files of one run per (ranks, ms per rank), and each run's measured bounds."""
    runs, bounds = [], []
    for n, ms in shape:
        out = tmp_path / f"{prefix}{n}.db"
        slept = []
        assert merge(out, rank_files(tmp_path, [ms] * n, name=f"{prefix}{n}",
                                     slept=slept)).returncode == 0
        runs.append(out)
        bounds.append(slept)
    return runs, bounds


def test_strong_scaling_known_answer(tmp_path):
    # 480 ms of work: 1 rank does it all, 2 ranks half each (perfect), 4 ranks 180 ms each
    # (480 / (4 x 180) = 66.7 % on an idle machine; a loaded one oversleeps each rank by its own
    # amount, so the known answer is from what the ranks measured in this run).
    runs, bounds = scaled_runs(tmp_path, ((1, 480), (2, 240), (4, 180)), "p")
    result = scaling(runs[::-1])  # any order: the fewest workers are the reference
    assert [r["ranks"] for r in result["runs"]] == [1, 2, 4]
    eff = sleep_efficiency(result)
    assert eff[0] == pytest.approx(100.0)
    for i in (1, 2):
        lo, hi = efficiency_bounds(bounds[0], bounds[i], weak=False)
        assert lo <= eff[i] <= hi, (i, eff, bounds)
    text = sonde("scaling", *runs).stdout
    assert "Strong" in text and "4x1 eff %" in text
    assert result["warnings"] == []


def test_scaling_warns_of_runs_on_the_same_workers(tmp_path):
    # Two programs on 2 workers each read "efficiency 312.6 %" with no word, their per-routine
    # columns both titled "1x2 s" (a red-team run): the ratio of two runs of one shape is noise
    # or a change of the program, not scaling.
    runs = scaled_runs(tmp_path, ((2, 60),), "s")[0] + scaled_runs(tmp_path, ((2, 20),), "t")[0]
    p = sonde("scaling", *runs)
    assert p.returncode == 0, p.stderr
    assert p.stderr == (f"sonde scaling: warning: {runs[0]} and {runs[1]} ran on the same 2 "
                        "workers (2 x 1): their ratio is run-to-run noise or a change of the "
                        "program, not scaling\n"), p.stderr
    assert "2x1 #1 s" in p.stdout and "2x1 #2 eff %" in p.stdout, p.stdout
    assert len(scaling(runs)["warnings"]) == 1


def test_scaling_refuses_a_run_with_ranks_missing_and_a_file_given_twice(tmp_path):
    # One rank's file of a 4-rank job, or 3 of its 4 ranks merged, read as a 1- or 3-rank run:
    # an efficiency 4 / 3 x too high (146 % seen), with no word.
    one = merge(tmp_path / "one.db", rank_files(tmp_path, [40], name="one"))
    assert one.returncode == 0, one.stderr
    four = rank_files(tmp_path, [40] * 4, name="four")
    part = merge(tmp_path / "part.db", four[:3])
    assert part.returncode == 0 and "warning: the run had 4 ranks and 3 are in" in part.stderr
    for partial in (four[2], tmp_path / "part.db"):
        p = sonde("scaling", tmp_path / "one.db", partial)
        assert p.returncode == 1, p.stdout
        n = 3 if partial.name == "part.db" else 1
        assert p.stderr.strip().endswith(f"holds {n} of its run's 4 ranks: scaling needs them "
                                         f"all (sonde merge -o run.db prof.rank*.db)"), p.stderr
    p = sonde("scaling", tmp_path / "one.db", tmp_path / "one.db")
    assert p.returncode == 2 and "is given twice" in p.stderr, p.stderr
    whole = merge(tmp_path / "all.db", four)
    assert whole.returncode == 0 and whole.stderr == "", whole.stderr
    assert [r["ranks"] for r in scaling([tmp_path / "one.db", tmp_path / "all.db"])["runs"]] == [1, 4]


def test_weak_scaling_known_answer(tmp_path):
    # 200 ms per rank at 1 and 2 ranks (perfect), 250 ms per rank at 4 (200 / 250 = 80 % on an
    # idle machine; the wrong, strong formula would give 50 and 20 %). The slowest rank's sleep
    # overshoots most on a loaded machine: the known answer is from the ranks' own measures.
    runs, bounds = scaled_runs(tmp_path, ((1, 200), (2, 200), (4, 250)), "w")
    eff = sleep_efficiency(scaling(runs, "--weak"))
    assert eff[0] == pytest.approx(100.0)
    for i in (1, 2):
        lo, hi = efficiency_bounds(bounds[0], bounds[i], weak=True)
        assert lo <= eff[i] <= hi, (i, eff, bounds)


def test_csv_is_one_table_of_the_json(tmp_path):
    """sonde ranks and sonde scaling --format csv --section NAME: the rows of that table of the
    JSON, as CSV with its keys as the header (for pandas.read_csv); without a section, exit 2."""
    runs, _ = scaled_runs(tmp_path, ((1, 40), (2, 20)), "c")

    def csv_rows(*args):
        p = sonde(*args)
        assert p.returncode == 0, p.stderr
        return list(csv.DictReader(io.StringIO(p.stdout)))

    def same(csv_row, json_row):
        for key, value in json_row.items():
            if value is None:
                assert csv_row[key] == "", key
            elif isinstance(value, (int, float)):
                assert float(csv_row[key]) == pytest.approx(value), key
            else:
                assert csv_row[key] == value, key

    report = json.loads(sonde("ranks", runs[1], "--format", "json", "-n", 0).stdout)
    for section in ("per_rank", "imbalance", "bandwidth"):
        rows = csv_rows("ranks", runs[1], "--format", "csv", "--section", section, "-n", 0)
        assert len(rows) == len(report[section])
        for c, j in zip(rows, report[section]):
            same(c, j)
    result = scaling(runs)
    rows = csv_rows("scaling", *runs, "--format", "csv", "--section", "runs")
    assert len(rows) == 2
    for c, j in zip(rows, result["runs"]):
        same(c, j)
    for args in (("ranks", runs[1]), ("scaling", *runs)):
        p = sonde(*args, "--format", "csv")
        assert p.returncode == 2 and "--section" in p.stderr


def test_a_ranks_wrapper_that_execs_its_program_keeps_one_file(tmp_path):
    """A rank started through a wrapper that execs its program (`bash -c 'exec python3 ...'`,
    a train.sh under mpirun, srun or torchrun --no_python) passes it the environment bash read
    at its start, whose SONDE_OUTPUT is the name the rank was given (prof.db), not its own file
    (prof.rank1.db): the program claimed a file beside it (prof.rank1.<pid>.db) that no line
    named, and `sonde merge` of the rank files refused both as rank 1 (a red-team find)."""
    job = f"test-{uuid.uuid4()}"
    files = []
    for rank in (0, 1):
        d = tmp_path / f"r{rank}"
        d.mkdir()
        r = sonde("run", "-o", d / "prof.db", "bash", "-c", f"exec {BIN / 'known_time'} 1 10 1",
                  OMPI_COMM_WORLD_RANK=rank, OMPI_COMM_WORLD_SIZE=2, PMIX_NAMESPACE=job)
        assert r.returncode == 0, r.stderr
        assert sorted(p.name for p in d.glob("*.db")) == [f"prof.rank{rank}.db"]
        db = d / f"prof.rank{rank}.db"
        rows = query(db, "SELECT origin, rank, command FROM processes ORDER BY process_id")
        assert [(o, k) for o, k, _ in rows] == [("root", rank), ("exec", rank)], rows
        assert rows[1][2].split()[0].endswith("known_time"), rows
        files.append(db)
    r = merge(tmp_path / "merged.db", files)
    assert r.returncode == 0, r.stderr


# torchrun as it starts its workers on one node of two: global ranks, torchrun's variables.
FAKE_TORCHRUN = """#!/bin/sh
node=$1; shift
for local in 0 1; do
  RANK=$((node * 2 + local)) LOCAL_RANK=$local WORLD_SIZE=4 TORCHELASTIC_RUN_ID=job "$@" &
done
wait
"""


def test_torchrun_under_srun_names_each_worker_by_its_global_rank(tmp_path):
    """`srun -N 2 sonde run -o prof.db -- bash -c 'cd ... && torchrun ...'`, SLURM's usual
    multi-node start, each task given SLURM's variables by hand: every process of a task has
    SLURM_PROCID (its node), and they were read before torchrun's RANK, so each node's wrapper,
    torchrun and both workers shared prof.rank<node>.db, 2 "ranks" of 4 (a red-team find). Now
    each worker writes its global rank's file, and each task's launcher processes (the shell,
    torchrun) prof.launcher<task>.db, which its sonde run names."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "torchrun").write_text(FAKE_TORCHRUN)
    (bindir / "torchrun").chmod(0o755)
    path = f"{bindir}:{clean_env()['PATH']}"
    for task in (0, 1):
        r = sonde("run", "-o", tmp_path / "prof.db", "bash", "-c",
                  f"cd {tmp_path} && torchrun {task} {BIN / 'known_time'} 1 10 1",
                  PATH=path, SLURM_JOB_ID=77, SLURM_STEP_ID=0, SLURM_PROCID=task,
                  SLURM_NTASKS=2, SLURM_LOCALID=0)
        assert r.returncode == 0, r.stderr
        said = [line for line in r.stderr.splitlines() if line.startswith("sonde:")]
        assert said[0] == f"sonde: profile written to {tmp_path}/prof.launcher{task}.db", said
        assert said[1].startswith(f"sonde: {2 * task + 2} ranks wrote their own files"), said
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [
        "prof.launcher0.db", "prof.launcher1.db",
        "prof.rank0.db", "prof.rank1.db", "prof.rank2.db", "prof.rank3.db"]
    for rank in range(4):
        rows = query(tmp_path / f"prof.rank{rank}.db",
                     "SELECT rank, world_size, command FROM processes")
        assert len(rows) == 1 and rows[0][:2] == (rank, 4), rows
        assert rows[0][2].split()[0].endswith("known_time"), rows
    for task in (0, 1):
        rows = query(tmp_path / f"prof.launcher{task}.db",
                     "SELECT rank, command FROM processes ORDER BY process_id")
        assert all(rank is None for rank, _ in rows), rows
        commands = " | ".join(c for _, c in rows)
        assert "bash -c" in commands and "torchrun" in commands, commands
    r = merge(tmp_path / "all.db", sorted(tmp_path.glob("prof.*.db")))
    assert r.returncode == 0, r.stderr
    assert "prof.launcher0.db left out: the launcher's own profile" in r.stderr, r.stderr
    assert query(tmp_path / "all.db", "SELECT rank FROM processes ORDER BY rank") == \
        [(0,), (1,), (2,), (3,)]


# srun as it starts a step's tasks: SLURM's variables for each, the task's command run by a
# shell of its own (as a wrapper would).
FAKE_SRUN = """#!/bin/sh
for t in 0 1; do
  SLURM_STEP_ID=0 SLURM_PROCID=$t sh -c 'exec "$@"' sh "$@" &
done
wait
"""


def test_a_launcher_in_a_batch_step_is_no_rank(tmp_path):
    """A SLURM batch script runs as task 0 of the job, with SLURM_NTASKS the job's: `sonde run
    -o prof.db -- bash job.sh` there, job.sh starting its ranks with srun, named the batch
    shell rank 0 of 2, and srun's rank 0 joined its file. The shell is the task's launcher;
    srun's tasks (another job step) are the ranks, and a rank's own shell stays its rank's."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "srun").write_text(FAKE_SRUN)
    (bindir / "srun").chmod(0o755)
    (tmp_path / "job.sh").write_text(
        "#!/bin/bash\n# a SLURM batch script\n"
        f"srun {BIN / 'known_time'} 1 10 1\n")
    r = sonde("run", "-o", tmp_path / "prof.db", "bash", tmp_path / "job.sh",
              PATH=f"{bindir}:{clean_env()['PATH']}", SLURM_JOB_ID=78, SLURM_PROCID=0,
              SLURM_NTASKS=2, SLURM_LOCALID=0)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [
        "prof.launcher0.db", "prof.rank0.db", "prof.rank1.db"], r.stderr
    for rank in (0, 1):
        rows = query(tmp_path / f"prof.rank{rank}.db",
                     "SELECT rank, command FROM processes ORDER BY process_id")
        assert {k for k, _ in rows} == {rank} and rows[-1][1].split()[0].endswith("known_time")
    rows = query(tmp_path / "prof.launcher0.db", "SELECT rank, command FROM processes")
    assert rows and {r for r, _ in rows} == {None}, rows  # the batch shell and srun


# DeepSpeed's launch.py as it starts one node's workers: RANK, LOCAL_RANK and WORLD_SIZE, no
# TORCHELASTIC_RUN_ID (torchrun's), the node's SLURM variables inherited.
FAKE_DEEPSPEED_LAUNCH = """import os, subprocess, sys
node, script = int(sys.argv[1]), sys.argv[2]
workers = [subprocess.Popen([sys.executable, "-u", script],
                            env=dict(os.environ, RANK=str(node * 2 + local),
                                     LOCAL_RANK=str(local), WORLD_SIZE="4"))
           for local in (0, 1)]
sys.exit(max(w.wait() for w in workers))
"""


@pytest.mark.parametrize("how", ["python -m sonde", "sonde run"])
def test_deepspeed_launch_under_srun_names_each_worker_by_its_global_rank(tmp_path, how):
    """`srun -N 2 python3 -m sonde -o prof.db -m deepspeed.launcher.launch ...`: DeepSpeed's
    workers have RANK and WORLD_SIZE but not torchrun's TORCHELASTIC_RUN_ID, so SLURM_PROCID
    (their node) was read first and both workers of a node shared prof.rank<node>.db with
    launch.py, 2 "ranks" of 4. Now a WORLD_SIZE larger than SLURM's tasks is the worker's, and
    launch.py is its node's launcher, in the Python launcher (which prepares the file) as in
    libsonde (which writes it)."""
    import os
    package = tmp_path / "site" / "deepspeed" / "launcher"
    package.mkdir(parents=True)
    for d in (package.parent, package):
        (d / "__init__.py").write_text("")
    (package / "launch.py").write_text(FAKE_DEEPSPEED_LAUNCH)
    # One write a line: DeepSpeed's launcher runs its workers with python -u, and two workers'
    # prints into one pipe interleaved their words ("rankrank  01").
    (tmp_path / "train.py").write_text("import os, time\ntime.sleep(0.05)\n"
                                       "os.write(1, f\"rank {os.environ['RANK']}\\n\".encode())\n")
    build_python = os.path.join(os.environ["SONDE_BUILD"], "python")
    for task in (0, 1):
        slurm = dict(SLURM_JOB_ID=79, SLURM_STEP_ID=0, SLURM_PROCID=task, SLURM_NTASKS=2,
                     SLURM_LOCALID=0)
        launch = ["-m", "deepspeed.launcher.launch", str(task), "train.py"]
        slurm = {k: str(v) for k, v in slurm.items()}
        if how == "sonde run":
            command = [CLI, "run", "-o", "prof.db", "--", "/usr/bin/python3", *launch]
            env = clean_env(PYTHONPATH=str(tmp_path / "site"), **slurm)
        else:
            command = ["/usr/bin/python3", "-m", "sonde", "-o", "prof.db", *launch]
            env = clean_env(PYTHONPATH=f"{tmp_path / 'site'}:{build_python}", **slurm)
        r = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.split("\n")[:2]) == [f"rank {2 * task}", f"rank {2 * task + 1}"]
        said = [line for line in r.stderr.splitlines() if line.startswith("sonde:")]
        assert any(line.startswith("sonde: profile written to") and
                   line.endswith(f"prof.launcher{task}.db") for line in said), said
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [
        "prof.launcher0.db", "prof.launcher1.db",
        "prof.rank0.db", "prof.rank1.db", "prof.rank2.db", "prof.rank3.db"]
    for rank in range(4):
        rows = query(tmp_path / f"prof.rank{rank}.db", "SELECT rank, world_size FROM processes")
        assert rows == [(rank, 4)], rows
    for task in (0, 1):
        rows = query(tmp_path / f"prof.launcher{task}.db", "SELECT rank, command FROM processes")
        assert len(rows) == 1 and rows[0][0] is None, rows
        assert "deepspeed.launcher.launch" in rows[0][1], rows


def test_a_command_of_one_profile_given_the_ranks_files_says_to_merge(tmp_path):
    """`sonde ranks p.rank*.db`, what a user types after torchrun, answered only "The following
    argument was not expected" (a red-team find): the merge that reads them as one is named."""
    d = tmp_path / "run"
    d.mkdir()
    for rank in (0, 1):
        p = run([BIN / "known_time", 1, 10, 1], db=d / "prof.db", OMPI_COMM_WORLD_RANK=rank,
                OMPI_COMM_WORLD_SIZE=2, PMIX_NAMESPACE="several")
        assert p.returncode == 0, p.stderr
    files = [d / "prof.rank0.db", d / "prof.rank1.db"]
    for command, after in (("ranks", ""), ("report", " (--rank R for one rank's)")):
        r = sonde(command, *files)
        assert r.returncode == 2 and r.stdout == "", r
        assert r.stderr == (
            f"sonde {command}: reads one profile, and was given 2; ranks' files read as one "
            f"once merged: sonde merge -o {d}/prof.merged.db {files[0]} {files[1]}, then sonde "
            f"{command} {d}/prof.merged.db{after}\n"), r.stderr
    # Not ranks' files: diff's two sides too; a file that is not there is CLI11's word.
    other = tmp_path / "other.db"
    other.write_bytes(files[0].read_bytes())
    r = sonde("report", files[0], other)
    assert "sonde diff A B to compare two" in r.stderr and r.returncode == 2, r.stderr
    r = sonde("report", files[0], tmp_path / "missing.db")
    assert "not expected" in r.stderr and r.returncode == 2, r.stderr
