"""Bad settings and unusable outputs: one clear line, a safe default, the host unharmed."""
from conftest import BIN, integrity_ok, query, read_only_directory, routine_calls, run


def test_bad_variable_values_warn_once_and_fall_back(db):
    r = run([BIN / "blas_threads", 1, 100], db, SONDE_FLUSH_INTERVAL="abc", SONDE_TRACE="maybe")
    assert r.returncode == 0 and r.stdout.startswith("checksum")
    lines = [l for l in r.stderr.splitlines() if l.startswith("sonde:")]
    assert sum("SONDE_FLUSH_INTERVAL='abc'" in l for l in lines) == 1
    assert sum("SONDE_TRACE='maybe'" in l for l in lines) == 1
    assert routine_calls(db, "cblas_sdot") == 100


def test_unwritable_output_leaves_the_program_unharmed(tmp_path):
    bare = run([BIN / "blas_threads", 2, 1000])
    r = run([BIN / "blas_threads", 2, 1000], tmp_path / "no" / "such" / "dir" / "p.db")
    assert r.returncode == 0 and r.stdout == bare.stdout
    assert "cannot write the profile" in r.stderr and "No such file or directory" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_a_read_only_output_directory_is_named_as_the_cause(tmp_path):
    # The claim's errno (EROFS) was lost and SQLite's open said "unable to open database file:
    # No such file or directory" about a directory that exists.
    with read_only_directory(tmp_path) as ro:
        r = run([BIN / "blas_threads", 1, 10], ro / "p.db")
    assert r.returncode == 0 and r.stdout.startswith("checksum")
    assert r.stderr == (f"sonde: cannot write the profile: {ro}/p.db: Read-only file system; "
                        "this process runs unprofiled\n"), r.stderr


def test_a_name_too_long_for_its_journal_is_refused_at_once(tmp_path):
    # 248 characters and ".db" fit the directory (255) but not "-journal" beside them: the
    # profile was claimed, every flush then failed ("File name too long"), and an empty file
    # stayed, which the next run of that name refused as existing.
    import os
    from conftest import CLI
    bare = run([BIN / "blas_threads", 1, 10])
    long_name = tmp_path / ("c" * 248 + ".db")
    r = run([BIN / "blas_threads", 1, 10], long_name)
    assert (r.returncode, r.stdout) == (0, bare.stdout)
    assert "over the 247 its directory allows" in r.stderr and "runs unprofiled" in r.stderr
    r = run([CLI, "run", "-o", long_name, "--", BIN / "blas_threads", 1, 10])
    assert r.returncode == 1 and "over the 247" in r.stderr, r.stderr
    assert os.listdir(tmp_path) == []
    fits = tmp_path / ("c" * 244 + ".db")
    assert run([BIN / "blas_threads", 1, 10], fits).returncode == 0
    assert routine_calls(fits, "cblas_sdot") == 10


def test_a_path_too_long_for_sqlite_is_refused_at_once(tmp_path):
    # Under a 616-byte working directory the profile was lost ("unable to open database file":
    # SQLite's unix VFS makes a full path in 512 bytes) and no reader could open a file there;
    # the launchers now refuse at once, libsonde says so, and readers say why (a red-team find).
    import os
    import shutil
    import subprocess
    from conftest import CLI, clean_env
    deep = tmp_path
    for c in "abc":
        deep = deep / (c * 200)
    deep.mkdir(parents=True)
    bare = run([BIN / "blas_threads", 1, 10])
    r = run([BIN / "blas_threads", 1, 10], deep / "p.db")
    assert (r.returncode, r.stdout) == (0, bare.stdout)
    assert "bytes long, over the 500 SQLite can open a file by; this process runs " \
           "unprofiled" in r.stderr, r.stderr
    r = run([CLI, "run", "-o", deep / "p.db", "--", BIN / "blas_threads", 1, 10])
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert "over the 500 SQLite can open a file by: give -o a shorter path" in r.stderr, r.stderr
    python = os.environ.get("SONDE_PYTHON", "/usr/bin/python3")
    pythonpath = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
    (tmp_path / "s.py").write_text("print('ran')\n")
    r = subprocess.run([python, "-m", "sonde", "-o", str(deep / "p.db"), str(tmp_path / "s.py")],
                       env=clean_env(PYTHONPATH=pythonpath), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert "over the 500 SQLite can open a file by" in r.stderr, r.stderr
    assert os.listdir(deep) == []
    # A profile moved there is refused by its reader with the reason.
    short = tmp_path / "short.db"
    assert run([BIN / "blas_threads", 1, 10], short).returncode == 0
    shutil.copy(short, deep / "p.db")
    r = subprocess.run([CLI, "report", "p.db"], cwd=deep, env=clean_env(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1 and "its full path is" in r.stderr and "over the 500" in r.stderr, \
        r.stderr


def test_an_existing_output_is_never_overwritten(tmp_path):
    target = tmp_path / "prof.db"
    target.write_text("precious")
    r = run([BIN / "blas_threads", 1, 10], target)
    assert r.returncode == 0
    assert target.read_text() == "precious"
    others = [p for p in tmp_path.iterdir() if p.name != "prof.db"]
    assert len(others) == 1 and others[0].name.startswith("prof.")
    assert "already exists" in r.stderr and others[0].name in r.stderr
    assert routine_calls(others[0], "cblas_sdot") == 10


def test_trace_mode_counts_what_its_bounded_buffer_drops(db):
    r = run([BIN / "blas_threads", 1, 1000], db, SONDE_TRACE=1, SONDE_TRACE_BUFFER=100)
    assert r.returncode == 0
    assert integrity_ok(db)
    [(events,)] = query(db, "SELECT COUNT(*) FROM trace_events")
    [(dropped,)] = query(db, "SELECT SUM(dropped) FROM trace_drops")
    assert events == 100 and dropped == 900  # nothing lost silently: 100 + 900 = 1000 calls
    [(mode,)] = query(db, "SELECT mode FROM runs")
    assert mode == "trace"


def test_exit_status_and_output_are_unchanged(db):
    bare = run([BIN / "misbehave", "exit3"])
    r = run([BIN / "misbehave", "exit3"], db)
    assert (r.returncode, r.stdout) == (bare.returncode, bare.stdout) == (3, "calls 50\n")


def test_peaks_file_is_copied_into_the_profile_and_gives_pct_of_peak(db, tmp_path):
    peaks = tmp_path / "peaks.txt"
    # The fake BLAS has no thread query: a BLAS that cannot say runs on the calling thread, so
    # its GEMMs are held against the 1-thread peak.
    peaks.write_text("# by hand\ngemm.f64 1 50 manual\nnot a peak line\nmem.bw 0 12.5\n")
    r = run([BIN / "known_time", 4, 5000, 1], db, SONDE_PEAKS=peaks)
    assert r.returncode == 0
    assert [l for l in r.stderr.splitlines() if str(peaks) in l] == [
        f"sonde: {peaks}:3: threads must be a whole number >= 0: not a peak line, ignored"]
    assert sorted(query(db, "SELECT resource, threads, value, source FROM peaks")) == [
        ("gemm.f64", 1, 50.0, "manual"), ("mem.bw", 0, 12.5, "manual")]
    [(gflops, pct, threads)] = query(db, "SELECT gflops, pct_peak, threads FROM gemm_shapes")
    assert threads == 1
    assert abs(pct - 100 * gflops / 50) < 1e-9
