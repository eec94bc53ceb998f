"""The README's "Using it" commands run in order, as written, from a directory laid out as the
repository root (build/ and examples/), each exiting 0. Only the step counts are cut (to 10) and
calibrate is made --quick, so the test takes seconds, and --force: under ctest -j2 the machine is
busy by design, and calibrate rightly refuses figures measured so (test_calibrate.py holds that
refusal); the peaks file is the test's own."""
import os
import re
import subprocess

from conftest import clean_env

SOURCE = os.environ.get("SONDE_SOURCE", "")
BUILD = os.environ.get("SONDE_BUILD", "")


def readme_commands():
    text = open(os.path.join(SOURCE, "README.md")).read()
    section = text.split("\n## Using it\n", 1)[1]
    section = re.split(r"\n##+ ", section, maxsplit=1)[0]
    return [line[4:] for line in section.splitlines() if line.startswith("    ")]


def test_the_readme_commands_run_in_order(tmp_path):
    commands = readme_commands()
    assert len(commands) >= 15 and commands[0].startswith("build/bin/sonde run -o prof.db")
    (tmp_path / "build").symlink_to(BUILD)
    (tmp_path / "examples").symlink_to(os.path.join(SOURCE, "examples"))
    env = clean_env(SONDE_PEAKS=tmp_path / "peaks.txt")
    for command in commands:
        shortened = re.sub(r"--steps \d+", "--steps 10", command)
        shortened = re.sub(r"sonde calibrate\b", "sonde calibrate --quick --force", shortened)
        r = subprocess.run(["bash", "-c", shortened], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, f"{command}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
    assert (tmp_path / "trace.json").stat().st_size > 0 and (tmp_path / "prof.folded").stat().st_size > 0
    assert (tmp_path / "pre.db").exists() and (tmp_path / "py.db").exists()
    page = (tmp_path / "prof.html").read_text()
    assert '<script id="sonde-data" type="application/json">' in page and 'src="http' not in page
