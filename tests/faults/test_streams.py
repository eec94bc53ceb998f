"""Cells: the standard streams sonde shares with the program. A pipe whose reader has gone
(`prog 2>&1 | head -1`) or a closed descriptor (`>&-`) must not end the program, `sonde run` or
the launcher by sonde's own messages, nor keep the program from running."""
import os
import signal
import subprocess

import pytest

from conftest import CLI, LIB, PYTHON, clean_env

PYPATH = os.path.join(os.environ.get("SONDE_BUILD", "."), "python")

# Each launch, as the command line that runs `program` under it writing `db`.
LAUNCHES = {
    "alone": lambda program, db: (program, {}),
    "preload": lambda program, db: (program, {"LD_PRELOAD": LIB, "SONDE_OUTPUT": db}),
    "sonde-run": lambda program, db: ([CLI, "run", "-o", db, "--", *program], {}),
}
PY_LAUNCHES = {
    "re-exec": lambda script, db: ([PYTHON, "-m", "sonde", "--re-exec", "-o", db, script],
                                          {"PYTHONPATH": PYPATH}),
    "in-process": lambda script, db: ([PYTHON, "-m", "sonde", "--in-process", "-o", db, script],
                                      {"PYTHONPATH": PYPATH}),
}


def ended(cmd, env, fds, sigpipe_ignored):
    """Runs cmd with its descriptors 0-2 as `fds` says ("pipe": a pipe with no reader, "closed",
    or None: /dev/null); returns how it ended (an exit status, or -N for signal N)."""
    r, w = os.pipe()
    os.close(r)  # the reader has gone before the command starts
    null = os.open(os.devnull, os.O_RDWR)
    targets = {"pipe": w, None: null}

    def child():
        signal.signal(signal.SIGPIPE, signal.SIG_IGN if sigpipe_ignored else signal.SIG_DFL)
        for fd, how in enumerate(fds):
            if how == "closed":
                os.close(fd)
            else:
                os.dup2(targets[how], fd)

    try:
        p = subprocess.Popen(cmd, env=clean_env(**env), stdin=None, stdout=None, stderr=None,
                             preexec_fn=child, close_fds=True, start_new_session=True)
        try:
            return p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return "hung"
    finally:
        os.close(w)
        os.close(null)


STDERR_CASES = {
    "stderr-broken-pipe": (None, None, "pipe"),
    "stdout-stderr-broken-pipe": (None, "pipe", "pipe"),
    "stderr-closed": (None, None, "closed"),
    "all-closed": ("closed", "closed", "closed"),
}


@pytest.mark.parametrize("sigpipe", ["sigpipe-default", "sigpipe-ignored"])
@pytest.mark.parametrize("case", list(STDERR_CASES))
@pytest.mark.parametrize("launch", ["preload", "sonde-run"])
def test_native_program_streams(launch, case, sigpipe, tmp_path):
    """a quiet native program with a broken or closed stderr: it ends as it does alone"""
    db = str(tmp_path / "prof.db")
    ignored = sigpipe == "sigpipe-ignored"
    alone = ended(*LAUNCHES["alone"](["/bin/true"], db), STDERR_CASES[case], ignored)
    profiled = ended(*LAUNCHES[launch](["/bin/true"], db), STDERR_CASES[case], ignored)
    assert alone == 0
    assert profiled == alone, f"{launch}: ended {profiled}, alone {alone}"
    assert os.path.exists(db), "no profile"


@pytest.mark.parametrize("case", list(STDERR_CASES) + ["stdin-closed", "stdout-closed"])
@pytest.mark.parametrize("launch", list(PY_LAUNCHES))
def test_python_launcher_streams(launch, case, tmp_path):
    """python3 -m sonde with a broken or closed standard stream: the script runs and the run
    ends as the script does alone"""
    db = str(tmp_path / "prof.db")
    marker = tmp_path / "ran"
    script = tmp_path / "touch.py"
    script.write_text(f"open({str(marker)!r}, 'w').write('x')\n")
    fds = {"stdin-closed": ("closed", None, None),
           "stdout-closed": (None, "closed", None)}.get(case) or STDERR_CASES[case]
    alone = ended([PYTHON, str(script)], {}, fds, False)
    assert alone == 0 and marker.exists()
    marker.unlink()
    profiled = ended(*PY_LAUNCHES[launch](str(script), db), fds, False)
    assert marker.exists(), f"{launch}: the script did not run (ended {profiled})"
    assert profiled == alone, f"{launch}: ended {profiled}, alone {alone}"
    assert os.path.exists(db), "no profile"


# A program that closes its stderr and opens a data file, which takes descriptor 2, or that
# moves its log onto 2 with dup2: sonde's last line ("sonde: profile written to ...") went into
# that file (a red-team find). sonde writes its lines only while 2 is the file it found.
REOPENED_STDERR = """
import os, sys
how = sys.argv[1]
if how == "closed":
    os.close(2)
    fd = os.open("data.bin", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    assert fd == 2, fd
else:
    fd = os.open("app.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
os.write(2, b"DATA:2")
"""


@pytest.mark.parametrize("launch", ["preload", "sonde-run", *PY_LAUNCHES])
@pytest.mark.parametrize("how", ["closed", "dup2"])
def test_a_file_the_program_puts_on_descriptor_2_gets_nothing_of_sondes(launch, how, tmp_path):
    """a data file or a log the program put on descriptor 2 holds only what it wrote there"""
    script = tmp_path / "reopen.py"
    script.write_text(REOPENED_STDERR)
    db = tmp_path / "prof.db"
    if launch in PY_LAUNCHES:
        cmd, env = PY_LAUNCHES[launch](str(script), str(db))
    else:
        cmd, env = LAUNCHES[launch]([PYTHON, str(script)], str(db))
    r = subprocess.run([*cmd, how], cwd=tmp_path, env=clean_env(**env), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    written = (tmp_path / ("data.bin" if how == "closed" else "app.log")).read_bytes()
    assert written == b"DATA:2", written
    assert db.exists()
