"""sonde merge and sonde ranks on a real mpirun: mpi_calls on 4 oversubscribed ranks (an
MPI_Allreduce of 4,000 bytes, a Bcast of 80, a ring exchange of 400 per step), nonblocking with
the compute in flight, or --blocking."""
import json
import shutil
import sqlite3
import subprocess

import pytest

from conftest import BIN, CLI, LIB, clean_env, ompi_session_base, query

MPIRUN = shutil.which("mpirun")
PROG = BIN / "mpi_calls"
pytestmark = pytest.mark.skipif(MPIRUN is None or not PROG.exists(),
                                reason="no mpirun, or sonde built without MPI headers")
STEPS, NP = 5, 4


def merged_run(tmp_path, *prog_args, steps=STEPS):
    d = tmp_path / "ranks"
    d.mkdir()
    cmd = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", str(NP), CLI, "run", "-o",
           d / "prof.db", "--", PROG, "--steps", steps, "--compute-ms", 20, *prog_args]
    p = subprocess.run([str(c) for c in cmd], env=clean_env(SONDE_LIBRARY=LIB),
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "run.db"
    p = subprocess.run([CLI, "merge", "-o", str(out), str(d)], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    return d, out


def ranks_json(db):
    p = subprocess.run([CLI, "ranks", str(db), "--format", "json", "-n", "0"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_ranks_of_a_real_mpirun(tmp_path):
    d, out = merged_run(tmp_path)
    assert query(out, "SELECT rank, world_size FROM processes ORDER BY rank") == \
        [(r, NP) for r in range(NP)]
    report = ranks_json(out)
    assert report["ranks"] == NP
    bw = {(r["op"], r["message_bytes"]): r for r in report["bandwidth"]}
    allreduce = bw[("MPI_Allreduce", 4000)]
    assert (allreduce["calls"], allreduce["bytes"], allreduce["ranks"]) == \
        (STEPS * NP, 4000 * STEPS * NP, NP)
    assert allreduce["gbs"] == pytest.approx(allreduce["bytes"] / allreduce["time_s"] / 1e9)
    assert bw[("MPI_Isend", 400)]["gbs"] is None  # a nonblocking call's time is no transfer
    assert bw[("MPI_Barrier", 0)]["gbs"] is None
    for row in report["per_rank"]:
        # Each rank's comm time is its file's comm_ops time, setup apart.
        (own,) = query(d / f"prof.rank{row['rank']}.db",
                       "SELECT SUM(time_ns) FROM comm_ops WHERE kind <> 'setup'")[0]
        assert row["comm_s"] == pytest.approx(own / 1e9)
        # busy time in its three parts (rank_breakdown): set-up is MPI_Init and the like
        (setup,) = query(d / f"prof.rank{row['rank']}.db",
                         "SELECT SUM(time_ns) FROM comm_ops WHERE kind = 'setup'")[0]
        assert row["setup_s"] == pytest.approx(setup / 1e9)
        assert row["compute_s"] > 0.02 * STEPS  # --compute-ms 20 a step, outside MPI
        assert row["compute_s"] + row["comm_s"] + row["setup_s"] == pytest.approx(row["busy_s"])
        assert row["overlap_pct"] > 0  # the ring exchange is in flight during the compute
    p = subprocess.run([CLI, "ranks", str(out)], capture_output=True, text=True, timeout=60)
    assert "MPI_Allreduce" in p.stdout and "overlap %" in p.stdout


def test_blocking_exchange_overlaps_nothing(tmp_path):
    _, out = merged_run(tmp_path, "--blocking")
    for row in ranks_json(out)["per_rank"]:
        assert row["overlapped_s"] == 0 and row["overlap_pct"] == 0
        assert row["exposed_s"] > 0


def test_candidates_name_exposed_communication_not_the_wait_as_latency(tmp_path):
    """20 steps of a 4,000-byte MPI_Allreduce per rank, rank 0 computing 20 ms more per step:
    the other three wait for it in the Allreduce whatever the scheduler does (on 4 ranks sharing
    2 cores under load, a balanced run's exposed share fell under the rule's 10 % in one CI), so
    the blocking exchange leaves communication exposed. That wait is no latency of small
    messages: small-collectives takes the calls' time on the rank that waits least (a red-team
    run's 10 all-reduces of 80 bytes read 0.574 s a rank, 0.030 s on the slow rank, and were
    told to fuse them)."""
    d, out = merged_run(tmp_path, "--blocking", "--rank0-ms", 20, steps=20)
    p = subprocess.run([CLI, "candidates", str(out), "--format", "json"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    found = {(c["rule"], c["location"]): c for c in json.loads(p.stdout)["candidates"]}
    exposed = found[("comm-exposed", "run")]
    ev = exposed["evidence"]
    assert ev["overlap_pct"] == 0
    # The others' wait for rank 0 is rank-imbalance's, which no overlap hides: the gain is half
    # the exposed time of the rank exposing least (until 2026-12-07 half of the mean, and a red
    # team's ranks posting their all-reduces early gained nothing of it).
    assert ev["exposed_imbalance_s_per_rank"] == pytest.approx(
        ev["exposed_s_per_rank"] - ev["exposed_least_rank_s"])
    assert exposed["est_gain_s"] == pytest.approx(0.5 * ev["exposed_least_rank_s"])
    assert "waiting for the slowest" in exposed["advice"], exposed["advice"]
    # The Allreduce's time on each rank, from the rank's own file; the rule's is the least.
    per_rank = [query(d / f"prof.rank{k}.db",
                      "SELECT SUM(time_ns) / 1e9 FROM comm_ops WHERE op = 'MPI_Allreduce'")[0][0]
                for k in range(NP)]
    assert min(per_rank) < max(per_rank) / 2, per_rank  # the others waited for rank 0
    small = found.get(("small-collectives", "MPI_Allreduce of 4000 bytes"))
    if small is not None:
        assert small["evidence"]["calls_per_rank"] == 20 and small["evidence"]["ranks"] == NP
        assert small["evidence"]["time_s_per_rank"] == pytest.approx(min(per_rank), rel=1e-6)


def test_rank_imbalance_names_the_slow_computation_not_the_phase_that_waits_for_it(tmp_path):
    """Rank 0 computes 20 ms more per step in the phase 'compute'; the others wait for it in the
    phase 'allreduce', which holds the MPI_Allreduce alone. The rule named 'allreduce' first
    (its longest rank is one that waited), as a phase to even out."""
    _, out = merged_run(tmp_path, "--rank0-ms", 20, "--regions", steps=10)
    p = subprocess.run([CLI, "candidates", str(out), "--format", "json"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    imbalance = [c["location"] for c in json.loads(p.stdout)["candidates"]
                 if c["rule"] == "rank-imbalance"]
    assert "compute [region]" in imbalance, imbalance
    assert "allreduce [region]" not in imbalance, imbalance
    ranks = ranks_json(out)  # the imbalance table itself keeps every phase
    assert {"compute", "allreduce"} <= {r["routine"] for r in ranks["imbalance"]}, ranks


def last_line(cmd, cwd):
    """The last line sonde run says after `cmd` (the suggested merge, after a parallel job)."""
    p = subprocess.run([str(c) for c in cmd], env=clean_env(SONDE_LIBRARY=LIB), cwd=cwd,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stderr.splitlines()[-1]


def run_as_said(line, cwd):
    """Runs the merge command a launcher's last line suggests, as a user pasting it would."""
    m = subprocess.run(line.split(": ", 2)[2].replace("sonde", f"'{CLI}'", 1), shell=True,
                       cwd=cwd, capture_output=True, text=True, timeout=60)
    assert m.returncode == 0, m.stderr


def test_two_jobs_with_one_output_name_each_name_their_own_rank_files(tmp_path):
    # The second job, started as the first claims prof.db, writes prof.<pid>.db and its ranks
    # prof.<pid>.rank<R>.db. Both launchers named the first job's files (a red-team run), and the
    # second's suggested merge mixed two runs, which merge refuses.
    def job(steps):
        return subprocess.Popen(
            [str(c) for c in [CLI, "run", "-o", "prof.db", "--", MPIRUN, "--oversubscribe",
                              "--allow-run-as-root", "-np", 2, PROG, "--steps", steps,
                              "--compute-ms", 5]],
            env=clean_env(SONDE_LIBRARY=LIB, **ompi_session_base(tmp_path / f"ompi{steps}")),
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    # Started together: once the first has flushed, the second refuses the name instead
    # ("still being written by process ..."), which is its own test.
    first = job(100)
    second = job(2)
    out2 = second.communicate(timeout=120)[1]
    out1 = first.communicate(timeout=120)[1]
    assert first.returncode == 0 and second.returncode == 0, (out1, out2)
    # Which of the two claims the name first varies; each names its own run's files.
    written = []
    for out in (out1, out2):
        (name,) = [l.split("written to ", 1)[1] for l in out.splitlines()
                   if l.startswith("sonde: profile written to ")]
        base = name[:-len(".db")]
        assert out.splitlines()[-1] == (
            f"sonde: 2 ranks wrote their own files, {base}.rank0.db, {base}.rank1.db; to read "
            f"them as one: sonde merge -o {base}.merged.db {base}.rank*.db"), out
        written.append(name)
    assert "prof.db" in written and len(set(written)) == 2, written
    last1, last2 = out1.splitlines()[-1], out2.splitlines()[-1]
    for line in (last1, last2):
        run_as_said(line, tmp_path)


def test_a_second_run_suggests_a_merge_that_runs_beside_the_first_ones(tmp_path):
    # The second run into one name suggested `sonde merge -o prof.merged.db ...`, which the
    # first run's merge, done as said, made fail ("exists; --force replaces it").
    cmd = [CLI, "run", "-o", "prof.db", "--", MPIRUN, "--oversubscribe", "--allow-run-as-root",
           "-np", 2, PROG, "--steps", 2, "--compute-ms", 5]
    first = last_line(cmd, tmp_path)
    assert "sonde merge -o prof.merged.db " in first, first
    run_as_said(first, tmp_path)
    second = last_line(cmd, tmp_path)
    assert "sonde merge -o prof.merged.2.db " in second, second
    run_as_said(second, tmp_path)
    assert (tmp_path / "prof.merged.db").exists() and (tmp_path / "prof.merged.2.db").exists()


def test_sonde_run_on_mpirun_names_the_ranks_files(tmp_path):
    # The launcher's own file (mpirun's) holds no rank's work: the last lines name the ranks'
    # files, and the merge they suggest runs as said. A rank file of an earlier run is not named.
    stale = tmp_path / "prof.rank7.db"
    first = subprocess.run([CLI, "run", "-o", "old.db", "--", PROG, "--steps", "1"],
                           env=clean_env(SONDE_LIBRARY=LIB), cwd=tmp_path, capture_output=True,
                           text=True, timeout=60)
    assert first.returncode == 0, first.stderr
    (tmp_path / "old.db").rename(stale)
    with sqlite3.connect(stale) as c:  # an hour ago
        c.execute("UPDATE processes SET started_ns = started_ns - 3600000000000")
    cmd = [CLI, "run", "-o", "prof.db", "--", MPIRUN, "--oversubscribe", "--allow-run-as-root",
           "-np", 2, PROG, "--steps", 2, "--compute-ms", 5]
    p = subprocess.run([str(c) for c in cmd], env=clean_env(SONDE_LIBRARY=LIB), cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    said = [l for l in p.stderr.splitlines() if l.startswith("sonde:")]
    assert said[-2:] == [
        "sonde: profile written to prof.db",
        "sonde: 2 ranks wrote their own files, prof.rank0.db, prof.rank1.db; to read them as "
        "one: sonde merge -o prof.merged.db prof.rank0.db prof.rank1.db"], p.stderr
    # Alone in their folder, the ranks' files are named by pattern, and the merge runs as said.
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    suggested = last_line(cmd, fresh)
    assert suggested.endswith("to read them as one: sonde merge -o prof.merged.db prof.rank*.db")
    run_as_said(suggested, fresh)
    assert query(fresh / "prof.merged.db", "SELECT rank FROM processes ORDER BY rank") == \
        [(0,), (1,)]
    # In a folder with a space the command is quoted, the pattern's star outside the quotes, and
    # still runs as said (it was printed bare: pasted, it failed).
    (fresh / "my runs").mkdir()
    spaced = [c if c != "prof.db" else "my runs/prof.db" for c in cmd]
    suggested = last_line(spaced, fresh)
    assert suggested.endswith("sonde merge -o 'my runs/prof.merged.db' 'my runs/prof.rank'*.db")
    run_as_said(suggested, fresh)
    assert query(fresh / "my runs" / "prof.merged.db",
                 "SELECT rank FROM processes ORDER BY rank") == [(0,), (1,)]
    # The launcher's own file says so to its readers: report and candidates print the note,
    # ranks and scaling refuse it (they read it as a run of one rank, figures of nothing), and a
    # merge of prof*.db leaves it out (it was taken for a second rank 0).
    note = ("the launcher's own profile: the run's 2 ranks wrote their own files, "
            "prof.rank0.db, prof.rank1.db; to read them as one: sonde merge -o prof.merged.db "
            "prof.rank*.db")
    report = subprocess.run([CLI, "report", "prof.db"], cwd=fresh, capture_output=True,
                            text=True, timeout=60)
    assert f"note: {note}" in report.stdout, report.stdout
    for args in (["ranks", "prof.db"], ["scaling", "prof.merged.db", "prof.db"]):
        r = subprocess.run([CLI, *args], cwd=fresh, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0 and r.stdout == "" and r.stderr == (
            f"sonde {args[0]}: prof.db holds no rank's work: it is {note}\n"), r
    # One rank's file says it is one of the run's ranks (it read as a whole run of one).
    one = subprocess.run([CLI, "ranks", "prof.rank0.db"], cwd=fresh, capture_output=True,
                         text=True, timeout=60)
    assert one.stdout.splitlines()[0] == (
        "1 rank of the run's 2 (the others are in files of their own: sonde merge reads them "
        "as one)"), one.stdout
    m = subprocess.run([CLI, "merge", "-o", "all.db", "prof.db", "prof.rank0.db",
                        "prof.rank1.db"], cwd=fresh, capture_output=True, text=True, timeout=60)
    assert m.returncode == 0 and "prof.db left out: the launcher's own profile" in m.stderr, m
    assert query(fresh / "all.db", "SELECT rank FROM processes ORDER BY rank") == [(0,), (1,)]
    # Run again into the same name: the ranks write beside their earlier files
    # (prof.rank0.<pid>.db), and the last line names those, the ones this run wrote. (A file
    # counts as this run's when a process of it started at most 1 s before the run did.)
    import time
    time.sleep(1.5)
    p = subprocess.run([str(c) for c in cmd[:2] + ["--force"] + cmd[2:]],
                       env=clean_env(SONDE_LIBRARY=LIB), cwd=fresh, capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    last = p.stderr.splitlines()[-1]
    assert last.startswith("sonde: 2 ranks wrote their own files, prof.rank0."), p.stderr
    # prof.merged.db is the first run's merge, made above: the next free name is suggested.
    named = last.split("one: sonde merge -o prof.merged.2.db ")[1].split()
    assert len(named) == 2 and all(n.startswith(f"prof.rank{r}.") and n != f"prof.rank{r}.db"
                                   for r, n in enumerate(named)), named
    assert all((fresh / n).exists() for n in named)


def test_python_m_sonde_ranks_leave_the_name_asked_for_alone(tmp_path):
    """`mpirun -np 4 python3 -m sonde -o prof.db prog.py` where prof.db is an earlier run's
    profile: every rank's launcher set that prof.db aside as prof.db.old, though no rank writes
    it, and ranks racing for it could find it gone and stop the job. Each rank now looks at its
    own file only, as `sonde run` does: an earlier one stays, the rank writing beside it, and
    --force replaces it; prof.db is never touched."""
    import hashlib
    import os
    prog = tmp_path / "prog.py"
    prog.write_text("import time\ntime.sleep(0.05)\n")
    env = clean_env(PYTHONPATH=os.path.join(os.environ["SONDE_BUILD"], "python"))
    mpirun = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "4",
              "/usr/bin/python3", "-m", "sonde", "-o", "prof.db"]

    def run(*extra):
        p = subprocess.run([str(c) for c in [*mpirun, *extra, prog]], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return p.stderr

    single = subprocess.run(["/usr/bin/python3", "-m", "sonde", "-o", "prof.db", prog], env=env,
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert single.returncode == 0, single.stderr
    digest = hashlib.sha256((tmp_path / "prof.db").read_bytes()).hexdigest()
    said = run()
    assert "kept the previous profile" not in said, said
    ranks = [f"prof.rank{r}.db" for r in range(4)]
    assert sorted(p.name for p in tmp_path.glob("prof*")) == ["prof.db", *ranks]
    for r in range(4):
        assert f"sonde: profile written to prof.rank{r}.db" in said, said
    said = run()  # the ranks' earlier files stay; this run's go beside them
    for r in range(4):
        assert f"prof.rank{r}.db already exists; writing this run's profile to" in said, said
    assert len(list(tmp_path.glob("prof.rank*.db"))) == 8
    for f in tmp_path.glob("prof.rank*.*.db"):
        f.unlink()
    started = "SELECT MIN(started_ns) FROM processes"
    before = {r: query(tmp_path / r, started) for r in ranks}
    said = run("--force")
    assert sorted(p.name for p in tmp_path.glob("prof*")) == ["prof.db", *ranks], said
    assert all(query(tmp_path / r, started) > before[r] for r in ranks)  # replaced
    assert hashlib.sha256((tmp_path / "prof.db").read_bytes()).hexdigest() == digest


def test_a_preloaded_mpirun_notes_its_ranks_files(tmp_path):
    """LD_PRELOAD=libsonde.so SONDE_OUTPUT=prof.db mpirun ... (docs/distributed.md's third way
    to run): no sonde run outlives mpirun to note its ranks' files, and its own file read as a
    one-rank run (a red team's sonde scaling took mpirun's 0.6 s as the one-rank reference,
    60.1 % efficiency). The launcher notes them itself, once, and the readers refuse its file as
    they refuse sonde run's."""
    cmd = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", "2", PROG, "--steps", 2,
           "--compute-ms", 5]
    p = subprocess.run([str(c) for c in cmd], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env=clean_env(LD_PRELOAD=LIB,
                                                  SONDE_OUTPUT=str(tmp_path / "prof.db")))
    assert p.returncode == 0, p.stderr
    assert "sonde:" not in p.stderr  # a plain preload says nothing
    notes = query(tmp_path / "prof.db", "SELECT message FROM notes WHERE topic = 'rank-files'")
    assert len(notes) == 1 and "the run's 2 ranks wrote their own files" in notes[0][0], notes
    for args in (["ranks", "prof.db"], ["scaling", "prof.db", "prof.rank0.db"]):
        r = subprocess.run([CLI, *args], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode != 0 and "prof.db holds no rank's work" in r.stderr, r
