"""The issue's walk-through: sonde run, then every reading of the file it wrote."""
import csv
import io
import json
import re
import subprocess

import pytest

from conftest import CLI, MLP, query, run


@pytest.fixture(scope="module")
def profile(tmp_path_factory):
    db = tmp_path_factory.mktemp("flow") / "prof.db"
    r = run([CLI, "run", "-o", db, "--", MLP, "--steps", 60], OPENBLAS_NUM_THREADS=1)
    assert r.returncode == 0, r.stderr
    bare = run([MLP, "--steps", 60], OPENBLAS_NUM_THREADS=1)
    assert r.stdout == bare.stdout  # the program's results are unchanged by profiling
    return db


def test_report_is_a_flat_profile(profile):
    r = run([CLI, "report", profile])
    assert r.returncode == 0
    assert re.search(r"%Time\s+Exclusive.*Inclusive.*#Call\s+#Subrs", r.stdout)
    assert "cblas_sgemm" in r.stdout and "update" in r.stdout


def test_report_takes_cprofile_sort_names(profile):
    """A cProfile user's -s/--sort habit works: tottime/time, cumtime/cumulative, ncalls."""
    def table(key):
        r = run([CLI, "report", profile, "--sort", key, "--format", "csv"])
        assert r.returncode == 0, r.stderr
        return r.stdout
    for sonde, cprofile in (("excl", "tottime"), ("excl", "time"), ("incl", "cumtime"),
                            ("incl", "cumulative"), ("calls", "ncalls")):
        assert table(cprofile) == table(sonde), cprofile
    assert table("incl") != table("calls")
    for key in ("stdname", "nfl"):
        assert table(key) == table("name"), key
    for key in ("filename", "module"):
        assert table(key) == table("file"), key
    assert table("pcalls") == table("calls")
    # Ascending, as pstats sorts them: by the name sonde shows, by file and line, by line.
    def rows(key):
        return list(csv.DictReader(io.StringIO(table(key))))
    names = [r["name"] for r in rows("name")]
    assert names == sorted(names), names
    lines = [int(r["line"]) for r in rows("line")]
    assert lines == sorted(lines), lines
    bad = run([CLI, "report", profile, "--sort", "bogus"])
    assert bad.returncode != 0 and "tottime" in bad.stderr


def test_tree_shows_gemms_under_forward(profile):
    r = run([CLI, "tree", profile])
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    forward = next(i for i, l in enumerate(lines) if "forward [region]" in l)
    indent = lines[forward].index("forward")
    child = lines[forward + 1]
    assert "cblas_sgemm" in child and child.index("cblas_sgemm") > indent


def test_shapes_lists_the_forward_gemms_with_their_call_site(profile):
    r = run([CLI, "shapes", profile, "--format", "csv"])
    assert r.returncode == 0
    assert re.search(r"cblas_sgemm,.*linear_forward.*,100,1000,784,f32", r.stdout), r.stdout


def test_query_hotspots(profile):
    r = run([CLI, "query", profile,
             "SELECT routine, calls FROM hotspots ORDER BY excl_s DESC LIMIT 5", "--format",
             "csv"])
    assert r.returncode == 0
    rows = r.stdout.strip().splitlines()
    assert rows[0] == "routine,calls" and len(rows) == 6


def test_chrome_export_is_loadable_trace_json(profile):
    r = run([CLI, "export", profile, "--format", "chrome"])
    assert r.returncode == 0
    trace = json.loads(r.stdout)
    names = {e["name"] for e in trace["traceEvents"] if e.get("ph") == "X"}
    assert {"forward", "backward", "update", "cblas_sgemm"} <= names


def test_folded_export_feeds_flamegraphs(profile):
    r = run([CLI, "export", profile, "--format", "folded"])
    assert r.returncode == 0
    lines = r.stdout.strip().splitlines()
    assert all(re.fullmatch(r"[^ ].* \d+", l) for l in lines)
    assert any(l.startswith("step;forward;cblas_sgemm ") for l in lines)
    # The folded total is the busy threads' time, in microseconds: the measured calls'
    # exclusive time and the roots' own, a line `<thread>` (it was left out).
    total_us = sum(int(l.rsplit(" ", 1)[1]) for l in lines)
    [(excl_ns,)] = query(profile, "SELECT SUM(excl_ns) FROM nodes WHERE depth > 0")
    [(thread_s,)] = query(profile, "SELECT thread_s FROM run_totals")
    assert abs(total_us - thread_s * 1e6) <= len(lines)
    root_us = int(next(l for l in lines if l.startswith("<thread> ")).split()[1])
    assert abs(root_us - (thread_s * 1e6 - excl_ns / 1e3)) <= len(lines)


def test_dash_output_is_standard_output(profile, tmp_path):
    """`-o -` is standard output, as for most tools (it wrote a file named "-")."""
    r = subprocess.run([CLI, "export", profile, "--format", "folded", "-o", "-"], cwd=tmp_path,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout == run([CLI, "export", profile, "--format", "folded"]).stdout != ""
    assert not (tmp_path / "-").exists()


def test_outputs_that_are_not_regular_files_are_written_through_never_replaced(profile, tmp_path):
    # -o /dev/null, /dev/stdout, a FIFO, a symbolic link: written through, as a shell's `>`
    # writes; the commands renamed a new file over them (as root, `sonde export -o /dev/null`
    # left a regular file as the system's /dev/null). A profile's own output (run, merge) must
    # be a regular file: those are refused, even with --force, and left as they were.
    import os
    import stat
    import threading
    folded = run([CLI, "export", profile, "--format", "folded"]).stdout
    assert folded
    device = tmp_path / "null"
    if os.geteuid() == 0:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    else:
        device.symlink_to("/dev/null")
    link = tmp_path / "out_link"
    target = tmp_path / "target.txt"
    target.write_text("old")
    link.symlink_to(target)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    assert run([CLI, "export", profile, "--format", "folded", "-o", fifo]).returncode == 0
    reader.join(30)
    assert got == [folded]
    for out in (device, link):
        r = run([CLI, "export", profile, "--format", "folded", "-o", out])
        assert r.returncode == 0, r.stderr
    assert target.read_text() == folded and link.is_symlink()
    r = run([CLI, "view", profile, "--html", link, "--force"])
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and target.read_text().lower().startswith("<!doctype html>")
    for cmd in ([CLI, "run", "--force", "-o", device, "--", "/bin/true"],
                [CLI, "run", "--force", "-o", link, "--", "/bin/true"],
                [CLI, "merge", "--force", "-o", fifo, profile]):
        r = run(cmd)
        assert r.returncode != 0 and "not a regular file" in r.stderr, (cmd, r.stderr)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and link.is_symlink()
    assert stat.S_ISCHR(os.stat(device).st_mode)


def test_an_input_is_never_the_output(profile, tmp_path):
    # `export p.db -o p.db` overwrote the profile it read; through a link to it, writing
    # through emptied it before it was read. Refused as merge refuses it (exit 2).
    import shutil
    copy = tmp_path / "p.db"
    shutil.copy(profile, copy)
    link = tmp_path / "link.db"
    link.symlink_to(copy)
    before = copy.read_bytes()
    for cmd in ([CLI, "export", copy, "--format", "svg", "-o", copy],
                [CLI, "export", copy, "--format", "folded", "-o", link],
                [CLI, "export", link, "--format", "folded", "-o", tmp_path / "." / "p.db"],
                [CLI, "view", copy, "--html", link, "--force"],
                [CLI, "merge", "--force", "-o", link, copy]):
        r = run(cmd)
        assert r.returncode == 2 and "is both an input and the output" in r.stderr, (cmd, r.stderr)
    assert copy.read_bytes() == before


def test_an_error_naming_an_odd_path_is_one_line(profile, tmp_path):
    # A path with a newline split the error in two lines, the second looking like another's.
    odd = tmp_path / "a\nsonde: b"
    odd.mkdir()
    for cmd in ([CLI, "report", odd / "missing.db"],
                [CLI, "export", profile, "--format", "folded", "-o", odd / "no" / "x.folded"]):
        r = run(cmd)
        assert r.returncode == 1, (cmd, r.stderr)
        assert r.stderr.count("\n") == 1 and "a\\nsonde: b" in r.stderr, r.stderr


def test_csv_export_tells_apart_paths_whose_names_join_the_same(profile):
    # Each row is one path of routines; path_ids is what tells apart a frame named "a;b" from
    # a frame a calling b, whose path columns read the same.
    import csv
    import io
    r = run([CLI, "export", profile, "--format", "csv"])
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert list(rows[0]) == ["path", "calls", "incl_s", "excl_s", "path_ids"]
    assert len({row["path_ids"] for row in rows}) == len(rows)
    assert [(row["path"], row["path_ids"]) for row in rows] == query(
        profile, "SELECT path, path_ids FROM callpaths ORDER BY path, path_ids")


def test_a_mistyped_command_is_one_line_naming_the_one_meant():
    for word, meant in (("reprot", "report"), ("tre", "tree"), ("candiates", "candidates"),
                        ("sahpes", "shapes")):
        r = run([CLI, word, "x.db"])
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr == (f"sonde: '{word}' is not a sonde command; did you mean '{meant}'? "
                            "(sonde --help lists them)\n"), r.stderr
    r = run([CLI, "frobnicate"])
    assert r.returncode == 2
    assert r.stderr == "sonde: 'frobnicate' is not a sonde command (sonde --help lists them)\n"
    assert run([CLI, "report", "--help"]).returncode == 0  # real commands untouched


@pytest.mark.parametrize("args, command", [
    (["report"], "sonde report"),
    (["tree", "--min-pct", "x", "f.db"], "sonde tree"),
    (["calibrate", "--show", "--quick"], "sonde calibrate"),
    (["report", "-s", "size", "f.db"], "sonde report"),
    # CLI11's own checks said "Value -1 not in range 0.000000 to 1797...(300 digits)" and
    # "Could not convert: --depth = 1.5"; `sonde run` alone printed its 77-line help too.
    (["tree", "f.db", "--depth", "-1"], "sonde tree"),
    (["tree", "f.db", "--depth", "1.5"], "sonde tree"),
    (["tune", "--repeat", "x", "--", "true"], "sonde tune"),
    (["tune", "--timeout", "-1", "--", "true"], "sonde tune"),
    (["view", "f.db", "--port", "abc"], "sonde view"),
    (["run"], "sonde run"),
])
def test_a_usage_error_is_one_line_named_as_the_others(args, command):
    # CLI11's own message was two lines with no "sonde ...:" in front, where every other error
    # of sonde's is one line so named (a red-team find).
    r = run([CLI, *args])
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(command + ": "), r.stderr
    assert lines[0].endswith(f"(see {command} --help)"), r.stderr


def test_a_profile_named_like_an_option_is_said_to_be_read_as_one(profile, tmp_path):
    """`sonde report -dash.db` said "file is required", `sonde diff -dash.db x.db` "argument
    was not expected", of commands given their files; `sonde diff -- a b` "files is required"
    (a red-team find). Each now says what happened, in one line."""
    import shutil
    shutil.copy(profile, tmp_path / "-dash.db")
    for args, who in ((["report", "-dash.db"], "sonde report"),
                      (["diff", "-dash.db", str(profile)], "sonde diff")):
        r = subprocess.run([CLI, *args], cwd=tmp_path, capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and r.stdout == "", r
        assert r.stderr == (f"{who}: -dash.db reads as an option, not as the file of that name "
                            f"here: give it as ./-dash.db (see {who} --help)\n"), r.stderr
    r = subprocess.run([CLI, "report", "./-dash.db"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = run([CLI, "diff", "--", profile, profile])
    assert r.returncode == 2
    assert r.stderr.startswith("sonde diff: give one or more profiles on each side of --"), r.stderr


def test_a_run_read_while_it_goes_on_is_said_to_be_running(tmp_path):
    """sonde report on the file of a run still going (its periodic flushes): the reader said
    "killed by SIGKILL or a crash of the machine ... or still running" of a process alive on
    this host, where it can tell; it now says it is running, and the crash line comes back for
    the same file once the process is killed."""
    import os
    import signal
    import time
    from conftest import clean_env
    script = tmp_path / "long.py"
    script.write_text("import time\nwhile True:\n    sum(range(10000))\n    time.sleep(0.01)\n")
    db = tmp_path / "live.db"
    p = subprocess.Popen(["/usr/bin/python3", "-m", "sonde", "--flush-interval", "1", "-o",
                          str(db), str(script)],
                         env=clean_env(PYTHONPATH=os.path.join(os.environ["SONDE_BUILD"], "python")),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if db.exists() and query(db, "SELECT COUNT(*) FROM processes WHERE last_flush_ns "
                                         "IS NOT NULL")[0][0] > 0:
                break
            time.sleep(0.2)
        (pid,), = query(db, "SELECT pid FROM processes")
        r = run([CLI, "report", str(db)])
        assert r.returncode == 0, r.stderr
        assert "the process is still running: its figures are as of its last flush" in r.stdout
        assert "did not write its final flush" not in r.stdout, r.stdout
        os.kill(pid, signal.SIGKILL)  # the profiled process itself: no final flush
        p.wait(timeout=60)
        r = run([CLI, "report", str(db)])
        assert "did not write its final flush" in r.stdout, r.stdout
        assert "the process is still running" not in r.stdout, r.stdout
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
