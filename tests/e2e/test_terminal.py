"""Output for a person at a terminal (issue 15): progress while sonde calibrate measures, colour in
the report's header and the candidates; none of it in a pipe, and no colour with NO_COLOR set."""
import os
import pty
import re
import subprocess

from conftest import BIN, CLI, clean_env, run

ESC = "\x1b["


def on_terminal(cmd, stream="stdout", **env):
    """Runs cmd with `stream` on a pseudo-terminal (the other one piped); returns both texts."""
    master, slave = pty.openpty()
    kw = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, stream: slave}
    e = clean_env(**env)
    if "NO_COLOR" not in env:
        e.pop("NO_COLOR", None)  # the user's own setting must not decide the test
    e["TERM"] = "xterm"
    p = subprocess.Popen([str(c) for c in cmd], env=e, **kw)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    piped = (p.stderr if stream == "stdout" else p.stdout).read().decode()
    p.wait(timeout=120)
    return seen.decode(errors="replace"), piped, p.returncode


def profile(db):
    r = run([BIN / "named_regions"], db)
    assert r.returncode == 0, r.stderr
    return db


def test_report_header_in_colour_on_a_terminal_only(db):
    profile(db)
    tty, _, rc = on_terminal([CLI, "report", db])
    assert rc == 0
    assert f"{ESC}1mcommand:{ESC}0m" in tty, tty
    assert re.search(r"\x1b\[1m%Time .*\x1b\[0m", tty), tty
    piped = run([CLI, "report", db])
    assert ESC not in piped.stdout
    # The same text once the colour is taken out.
    assert re.sub(r"\x1b\[\d+m", "", tty).replace("\r\n", "\n") == piped.stdout


def test_no_color_is_respected(db):
    profile(db)
    tty, _, rc = on_terminal([CLI, "report", db], NO_COLOR="1")
    assert rc == 0 and "command:" in tty
    assert ESC not in tty


def test_candidates_in_colour_on_a_terminal(tmp_path):
    db = tmp_path / "m.db"
    # mlp_train's Adam update in plain loops: the optimizer-update candidate.
    r = run([os.environ["SONDE_MLP"], "--steps", "5"], db)
    assert r.returncode == 0, r.stderr
    tty, _, rc = on_terminal([CLI, "candidates", db])
    assert rc == 0
    assert re.search(r"\x1b\[1m1\. \x1b\[0m\x1b\[36m\[[a-z-]+\]\x1b\[0m", tty), tty
    assert f"{ESC}2m   gain bound:{ESC}0m" in tty, tty
    assert ESC not in run([CLI, "candidates", db]).stdout


def test_calibrate_shows_progress_on_a_terminal_only(tmp_path):
    tty, out, rc = on_terminal([CLI, "calibrate", "--quick", "--force", "-o", tmp_path / "p.txt"],
                               stream="stderr")
    assert rc == 0
    assert re.search(r"calibrating gemm\.f32, 1 thread, n=256 \.\.\. [\d.]+ GFLOP/s", tty), tty
    assert re.search(r"calibrating mem\.bw, 1 thread, .* [\d.]+ GB/s", tty), tty
    assert "calibrating" not in out and "peaks written to" in out


def test_merge_shows_progress_on_a_terminal_only(tmp_path):
    """sonde merge of two rank files: a progress line on a terminal's stderr, ending at 2 of 2; the
    same merge with stderr piped writes no carriage return."""
    for rank in (0, 1):
        r = run([BIN / "blas_threads", "1", "10"], tmp_path / "prof.db", OMPI_MCA_ess_base_jobid="4242",
                OMPI_COMM_WORLD_RANK=rank, OMPI_COMM_WORLD_SIZE=2)
        assert r.returncode == 0, r.stderr
    files = [tmp_path / f"prof.rank{rank}.db" for rank in (0, 1)]
    tty, out, rc = on_terminal([CLI, "merge", "-o", tmp_path / "tty.db", *files], stream="stderr")
    assert rc == 0, tty
    assert re.search(r"\rsonde merge: 100 % \(2 of 2 files\), [\d.]+ s", tty), repr(tty)
    piped = run([CLI, "merge", "-o", tmp_path / "piped.db", *files])
    assert piped.returncode == 0, piped.stderr
    assert "\r" not in piped.stderr and " % (" not in piped.stderr


def test_color_always_never_and_clicolor_force(db):
    """--color=always paints a pipe too (less -R, CI logs), over NO_COLOR; --color=never paints
    no terminal; CLICOLOR_FORCE=1 paints a pipe unless NO_COLOR; and tree and metrics are
    painted as report is, the same text once the colour is taken out."""
    r = run([os.environ["SONDE_MLP"], "--steps", "5"], db)
    assert r.returncode == 0, r.stderr
    plain = {c: run([CLI, c, db]).stdout for c in ("report", "tree", "metrics", "candidates")}
    for command, text in plain.items():
        painted = run([CLI, command, db, "--color=always"], NO_COLOR="1").stdout
        assert ESC in painted, command
        assert re.sub(r"\x1b\[\d+m", "", painted) == text, command
    assert f"{ESC}1mprocess " in run([CLI, "tree", db, "--color", "always"]).stdout
    metrics = run([CLI, "metrics", db, "--color=always"]).stdout
    assert re.search(r"^\x1b\[1mTime per phase .*\x1b\[0m$", metrics, re.M), metrics
    tty, _, rc = on_terminal([CLI, "report", db, "--color=never"])
    assert rc == 0 and "command:" in tty and ESC not in tty
    assert ESC in run([CLI, "report", db], CLICOLOR_FORCE="1").stdout
    assert ESC not in run([CLI, "report", db], CLICOLOR_FORCE="0").stdout
    assert ESC not in run([CLI, "report", db], CLICOLOR_FORCE="1", NO_COLOR="1").stdout
    bad = run([CLI, "report", db, "--color=sometimes"])
    assert bad.returncode == 2 and "--color" in bad.stderr


def test_a_shared_profiles_values_cannot_drive_the_terminal(db):
    """The header's values come from the file, which may come from anyone: a host, CPU model,
    CPU quota, BLAS library and thread counts carrying a retitle (OSC 0) and a clear screen
    (CSI 2J) are shown escaped, as the command and the routine names were already (the host,
    BLAS and torch lines were printed raw until 2026-12-07, a red-team find)."""
    import sqlite3
    profile(db)
    evil = "\x1b]0;owned\x07\x1b[2J"
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET host = host || ?, cpu_model = ?", (evil, "cpu" + evil))
    run_id, process_id = con.execute("SELECT run_id, process_id FROM processes").fetchone()
    for key, value in (("cpu.quota", "1.5" + evil), ("blas.library", "/lib/libblas" + evil),
                       ("blas.threads", "4" + evil), ("torch.num_threads", "2" + evil)):
        con.execute("DELETE FROM run_info WHERE key = ?", (key,))
        con.execute("INSERT INTO run_info VALUES (?, ?, ?, ?)", (run_id, process_id, key, value))
    con.commit()
    con.close()
    r = run([CLI, "report", db])
    assert r.returncode == 0, r.stderr
    header = r.stdout.split("total:")[0]
    assert "\x1b" not in header and "\x07" not in header, repr(header)
    for line in ("host:", "BLAS:", "torch:"):
        assert any(l.startswith(line) and "\\x1b]0;owned\\x07\\x1b[2J" in l
                   for l in header.splitlines()), (line, header)
