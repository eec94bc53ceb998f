"""python3 -m sonde as a drop-in for python3 -m cProfile: the same argv gives the program the same
sys.argv, exit status and output as under cProfile (and -c as python -c); -s prints the report;
`import sonde` outside sonde does nothing; sonde.region() from Python."""
import glob
import json
import re
import os
import subprocess
import textwrap

import pytest

from conftest import CLI, clean_env, query

PY = "/usr/bin/python3"
BUILD = os.environ.get("SONDE_BUILD", "")
PYTHONPATH = os.path.join(BUILD, "python")

# Prints what the program sees and exits with the status its first argument names.
SEES = """\
import json, sys
print(json.dumps({"argv": sys.argv, "name": __name__}))
if len(sys.argv) > 1 and sys.argv[1].isdigit():
    sys.exit(int(sys.argv[1]))
"""


def run(argv, cwd, **env):
    return subprocess.run([PY, *map(str, argv)], env=clean_env(**{"PYTHONPATH": PYTHONPATH, **env}),
                          capture_output=True, text=True, timeout=120, cwd=cwd)


@pytest.fixture
def prog(tmp_path):
    (tmp_path / "sees.py").write_text(SEES)
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sees.py").write_text(SEES)
    return tmp_path


# argv after `-m cProfile -o c.prof` / `-m sonde -o s.db`: options after the script or the
# module are the program's, even those that sonde or cProfile have themselves.
@pytest.mark.parametrize("argv", [
    ["sees.py"],
    ["sees.py", "a", "b c"],
    ["sees.py", "-o", "x.db", "-s", "time", "--force", "-h", "--version"],
    ["sees.py", "--", "-m", "-c", "x"],
    ["sees.py", "3"],
    ["-m", "pkg.sees"],
    ["-m", "pkg.sees", "-o", "out", "-s", "calls", "-h", "-m", "x"],
    ["-m", "pkg.sees", "7", "--help"],
])
def test_the_program_sees_what_it_sees_under_cprofile(prog, argv):
    c = run(["-m", "cProfile", "-o", "c.prof", *argv], prog)
    s = run(["-m", "sonde", "-o", "s.db", *argv], prog)
    # The program's exit status, as without a profiler: cProfile swallows SystemExit (exits 0).
    program_args = argv[2:] if argv[0] == "-m" else argv[1:]
    status = int(program_args[0]) if program_args and program_args[0].isdigit() else 0
    assert s.returncode == run(argv, prog).returncode == status, s.stderr
    assert c.returncode == 0
    seen_c, seen_s = json.loads(c.stdout), json.loads(s.stdout)
    assert seen_s["name"] == seen_c["name"] == "__main__"
    if argv[0] == "-m":
        # cProfile leaves the module's name in argv[0]; python -m (and sonde) put its path.
        assert seen_s["argv"][1:] == seen_c["argv"][1:]
        assert seen_s["argv"][0] == str(prog / "pkg" / "sees.py")
        assert seen_s == json.loads(run(argv, prog).stdout)
    else:
        assert seen_s == seen_c
    assert s.stderr.splitlines()[-1] == "sonde: profile written to s.db", s.stderr
    assert (prog / "s.db").exists()


def test_a_module_gets_its_own_options_and_help(prog):
    data = prog / "d.json"
    data.write_text('{"b": 1, "a": 2}')
    c = run(["-m", "cProfile", "-o", "c.prof", "-m", "json.tool", "--sort-keys", data], prog)
    s = run(["-m", "sonde", "-o", "s.db", "-m", "json.tool", "--sort-keys", data], prog)
    assert (s.returncode, s.stdout) == (c.returncode, c.stdout) == (0, '{\n    "a": 2,\n    "b": 1\n}\n')
    h = run(["-m", "sonde", "-o", "h.db", "-m", "json.tool", "-h"], prog)
    assert h.returncode == 0 and h.stdout.startswith("usage: python -m json.tool"), h.stdout


def test_dash_c_runs_a_command_as_python_does(prog):
    cmd = "import sys, json; print(json.dumps([sys.argv, sys.path[0], __name__])); sys.exit(4)"
    p = run(["-c", cmd, "-o", "x", "y"], prog)
    s = run(["-m", "sonde", "-o", "s.db", "-c", cmd, "-o", "x", "y"], prog)
    assert (s.returncode, s.stdout) == (p.returncode, p.stdout) == (4, '[["-c", "-o", "x", "y"], "", "__main__"]\n')
    assert query(prog / "s.db", "SELECT COUNT(*) FROM routines WHERE name = '<string>:1(<module>)'") == [(1,)]


# What the interpreter gives __main__ and sys.path, as a program can see them.
SEES_MAIN = """\
import __main__, json, sys
print(json.dumps({"main": sorted((k, repr(v) if k != "__loader__" else type(v).__name__)
                                 for k, v in vars(__main__).items() if k.startswith("__")),
                  "path0": sys.path[0]}))
"""

MODES = [[], ["--in-process"]]


@pytest.mark.parametrize("mode", MODES, ids=["reexec", "in-process"])
@pytest.mark.parametrize("how", ["script", "-m", "-c", "-P script", "-P -m", "-P -c", "zipapp",
                                 "directory", "-P zipapp"])
def test_main_and_sys_path_are_the_interpreters(prog, how, mode):
    # -P (PYTHONSAFEPATH) adds nothing to sys.path: sonde overwrote sys.path[0], a real entry
    # (PYTHONPATH's first: a module not found, or the script's folder before the stdlib).
    # __main__ has __annotations__ (and __cached__ under -m); a zipapp or a directory with a
    # __main__.py runs as python runs it.
    (prog / "main_sees.py").write_text(SEES_MAIN)
    app = prog / "app"
    app.mkdir()
    (app / "__main__.py").write_text(SEES_MAIN)
    subprocess.run([PY, "-m", "zipapp", app, "-o", prog / "app.pyz"], check=True)
    words = how.split()
    flags, kind = words[:-1], words[-1]
    program = {"script": ["main_sees.py"], "-m": ["-m", "main_sees"], "-c": ["-c", SEES_MAIN],
               "zipapp": ["app.pyz"], "directory": ["app"]}[kind]
    # Another folder first on PYTHONPATH: the entry that -P leaves at sys.path[0].
    first = prog / "first"
    first.mkdir()
    (first / "main_sees.py").write_text(SEES_MAIN)  # where -P -m finds it (not in the cwd)
    path = f"{first}{os.pathsep}{PYTHONPATH}"
    plain = run([*flags, *program], prog, PYTHONPATH=path)
    s = run([*flags, "-m", "sonde", *mode, "-o", "s.db", *program], prog, PYTHONPATH=path)
    assert plain.returncode == 0, plain.stderr
    def seen(out):  # object addresses differ between any two runs
        return json.loads(re.sub(r" at 0x[0-9a-f]+", "", out))
    assert (s.returncode, seen(s.stdout)) == (0, seen(plain.stdout)), s.stderr


@pytest.mark.parametrize("mode", MODES, ids=["reexec", "in-process"])
@pytest.mark.parametrize("kind", ["script", "-c"])
def test_a_syntax_error_reads_as_pythons(prog, kind, mode):
    (prog / "bad.py").write_text("print('a')\nx = (1,\n")
    program = ["bad.py"] if kind == "script" else ["-c", "x = (1,"]
    plain = run(program, prog)
    s = run(["-m", "sonde", *mode, "-o", "s.db", *program], prog)
    assert plain.returncode == s.returncode == 1
    assert "SyntaxError" in plain.stderr and "Traceback" not in plain.stderr
    assert s.stderr.replace("sonde: profile written to s.db\n", "") == plain.stderr
    # The program never ran, so the hook never started: no note tells the user to run it with
    # python3 -m sonde, which is what was done (a red-team find).
    notes = [n for (n,) in query(prog / "s.db", "SELECT message FROM notes")]
    assert not [n for n in notes if "without sonde's Python hook" in n], notes


def test_dash_s_prints_the_report_after_the_program(prog):
    s = run(["-m", "sonde", "-o", "s.db", "-s", "cumulative", "sees.py", "a"], prog)
    assert s.returncode == 0, s.stderr
    out = s.stdout.splitlines()
    assert json.loads(out[0])["argv"] == ["sees.py", "a"]
    header = next(i for i, l in enumerate(out) if "Inclusive total msec" in l)
    rows = [l for l in out[header + 2:] if l.strip()]
    incl = [float(l.split()[2]) for l in rows]
    assert incl == sorted(incl, reverse=True) and any("sees.py:1(<module>)" in l for l in rows)
    # Every key of cProfile's -s sorts (pstats' sort_stats): the names ascending.
    s = run(["-m", "sonde", "-o", "n.db", "-s", "stdname", "sees.py", "a"], prog)
    assert s.returncode == 0, s.stderr
    out = s.stdout.splitlines()
    header = next(i for i, l in enumerate(out) if "Inclusive total msec" in l)
    assert len([l for l in out[header + 2:] if l.strip()]) > 1
    bad = run(["-m", "sonde", "-o", "b.db", "-s", "bogus", "sees.py"], prog)
    assert bad.returncode == 2 and "invalid choice: 'bogus'" in bad.stderr
    assert not (prog / "b.db").exists()


def test_version_trace_and_errors(prog):
    v = run(["-m", "sonde", "--version"], prog)
    assert v.returncode == 0 and v.stdout.startswith("sonde ") and v.stdout.split()[1][0].isdigit()
    t = run(["-m", "sonde", "-o", "t.db", "--trace", "sees.py"], prog)
    assert t.returncode == 0, t.stderr
    assert query(prog / "t.db", "SELECT COUNT(*) FROM trace_events")[0][0] > 0
    n = run(["-m", "sonde", "-o", "n.db", "sees.py"], prog)
    assert n.returncode == 0, n.stderr
    assert query(prog / "n.db", "SELECT COUNT(*) FROM trace_events") == [(0,)]
    e = run(["-m", "sonde", "-o", "e.db"], prog)
    assert e.returncode == 2 and "nothing to run" in e.stderr
    e = run(["-m", "sonde", "-o", "e.db", "-m"], prog)
    assert e.returncode == 2 and "argument -m: expected one argument" in e.stderr


def test_import_sonde_outside_sonde_starts_nothing(tmp_path):
    (tmp_path / "plain.py").write_text(textwrap.dedent("""\
        import sonde
        @sonde.region("step")
        def step(x):
            return x + 1
        with sonde.region("forward"):
            y = step(1)
        print(sonde.active(), y, step.__name__, sonde.flush(), sonde.start())
        sonde.stop()
    """))
    r = run(["plain.py"], tmp_path)
    assert (r.returncode, r.stdout, r.stderr) == (0, "False 2 step False None\n", "")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plain.py"]
    maps = run(["-c", "import sonde; sonde.active(); print(open('/proc/self/maps').read())"],
               tmp_path)
    assert "libsonde" not in maps.stdout


REGIONS = """\
import numpy as np
import sonde
a = np.ones((32, 32), dtype=np.float32)

class Model:
    @sonde.region("step")
    def step(self, x):
        with sonde.region("forward"):
            y = x.dot(a)
        with sonde.region("backward"):
            try:
                with sonde.region("inner"):
                    raise ValueError
            except ValueError:
                pass
            return y.dot(a)

m = Model()
for _ in range(5):
    m.step(a)
print(Model.step.__name__, Model.step.__wrapped__.__qualname__)
"""


@pytest.mark.parametrize("mode", [[], ["--builtins"]])
def test_regions_nest_with_python_frames_and_native_calls(tmp_path, mode):
    (tmp_path / "regions.py").write_text(REGIONS)
    r = run(["-m", "sonde", "-o", "r.db", *mode, "regions.py"], tmp_path)
    assert (r.returncode, r.stdout) == (0, "step Model.step\n"), r.stderr
    db = tmp_path / "r.db"
    paths = {p.split("regions.py:1(<module>);", 1)[1]: c
             for p, c in query(db, "SELECT path, calls FROM callpaths WHERE path LIKE '%step%'")}
    dot = "<built-in numpy.ndarray.dot>;" if mode else ""
    assert paths == {
        "step": 5, "step;regions.py:6(step)": 5,
        "step;regions.py:6(step);forward": 5, f"step;regions.py:6(step);forward;{dot}cblas_sgemm": 5,
        "step;regions.py:6(step);backward": 5, "step;regions.py:6(step);backward;inner": 5,
        f"step;regions.py:6(step);backward;{dot}cblas_sgemm": 5,
        **({"step;regions.py:6(step);forward;<built-in numpy.ndarray.dot>": 5,
            "step;regions.py:6(step);backward;<built-in numpy.ndarray.dot>": 5} if mode else {}),
    }, paths
    assert query(db, "SELECT COUNT(*) FROM notes WHERE topic = 'regions'") == [(0,)]
    # Nothing of sonde's own package is the program's: not its import finder, not the launcher's
    # exit handler (__main__.py:(_die_if_interrupted) was in every profile).
    package = os.path.join(PYTHONPATH, "sonde")
    assert query(db, "SELECT DISTINCT r.file || ':' || r.name FROM nodes n JOIN routines r "
                     "USING (routine_id) WHERE r.file LIKE ? || '%'", (package + os.sep,)) == []


def test_sonde_run_preloads_an_absolute_path(tmp_path):
    """A relative LD_PRELOAD breaks in children that change directory: sonde run passes an
    absolute one, also when SONDE_LIBRARY is given relative to the current directory."""
    lib = os.path.relpath(os.path.join(BUILD, "lib", "libsonde.so"), tmp_path)
    cli = os.path.join(BUILD, "bin", "sonde")
    child = "import os, subprocess; os.chdir('/'); print(os.environ['LD_PRELOAD'])"
    r = subprocess.run([cli, "run", "-o", "p.db", "--", PY, "-c", child], cwd=tmp_path,
                       env=clean_env(SONDE_LIBRARY=lib), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.normpath(os.path.join(tmp_path, lib))


TORCH_RANGES = """\
import torch
from torch.autograd.profiler import record_function
model = torch.nn.Linear(64, 64)
opt = torch.optim.Adam(model.parameters())
x = torch.ones(32, 64)
for _ in range(3):
    with record_function("fwd"):
        loss = model(x).sum()
    with torch.profiler.record_function("bwd"):
        loss.backward()
    opt.step()
print("ok")
"""


def test_torch_record_function_ranges_are_regions(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "ranges.py").write_text(TORCH_RANGES)
    r = run(["-m", "sonde", "-o", "t.db", "ranges.py"], tmp_path)
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    db = tmp_path / "t.db"
    regions = dict(query(db, "SELECT r.name, SUM(n.calls) FROM nodes n JOIN routines r "
                             "USING (routine_id) WHERE r.kind = 'region' GROUP BY r.name"))
    # The user's ranges, and the one torch's optimizer opens around each step.
    assert regions == {"fwd": 3, "bwd": 3, "Optimizer.step#Adam.step": 3}, regions
    paths = [p.split("ranges.py:1(<module>);", 1)[1] for (p,) in query(
        db, "SELECT path FROM callpaths WHERE path LIKE '%sgemm%' OR path LIKE '%adam.py%(step)'")]
    assert any(p.startswith("fwd;") and p.endswith("sgemm_") for p in paths), paths
    assert any(p.startswith("bwd;") and p.endswith("sgemm_") for p in paths), paths
    assert any("Optimizer.step#Adam.step;" in p and re.search(r"adam.py:\d+\(step\)$", p) for p in paths)
    assert query(db, "SELECT COUNT(*) FROM notes WHERE topic = 'regions'") == [(0,)]


TORCH_THREADS = """\
import torch
torch.set_num_threads(1)
print(torch.get_num_threads())
from torch import set_num_threads
set_num_threads(1)
print(torch.get_num_threads())
"""


def test_torch_threads_held_against_the_program(tmp_path):
    """SONDE_TORCH_THREADS holds torch's pool against the program's own set_num_threads (by
    attribute or imported by name); unset it changes nothing; a bad value is one line and off."""
    pytest.importorskip("torch")
    (tmp_path / "threads.py").write_text(TORCH_THREADS)
    held = run(["-m", "sonde", "-o", "a.db", "threads.py"], tmp_path, SONDE_TORCH_THREADS="3")
    assert (held.returncode, held.stdout) == (0, "3\n3\n"), held.stderr
    assert query(tmp_path / "a.db", "SELECT value FROM run_info "
                                    "WHERE key = 'torch.num_threads'") == [("3",)]
    import torch  # the version beside it, for advice that needs PyTorch 2 (torch.compile)
    assert query(tmp_path / "a.db", "SELECT value FROM run_info "
                                    "WHERE key = 'torch.version'") == [(torch.__version__,)]
    plain = run(["-m", "sonde", "-o", "b.db", "threads.py"], tmp_path)
    assert (plain.returncode, plain.stdout) == (0, "1\n1\n"), plain.stderr
    bad = run(["-m", "sonde", "-o", "c.db", "threads.py"], tmp_path, SONDE_TORCH_THREADS="many")
    assert (bad.returncode, bad.stdout) == (0, "1\n1\n"), bad.stderr
    said = [line for line in bad.stderr.splitlines() if "SONDE_TORCH_THREADS" in line]
    assert len(said) == 1 and "'many' is not a number from 0 or 1 to 65535" in said[0], bad.stderr


PAUSED = """\
import numpy as np
import sonde
def work(a):
    return a.dot(a)
a = np.ones((32, 32), dtype=np.float32)
work(a)
sonde.start()
for _ in range(3):
    work(a)
sonde.stop()
work(a)
"""


def test_paused_records_python_frames_between_start_and_stop(tmp_path):
    (tmp_path / "paused.py").write_text(PAUSED)
    r = run(["-m", "sonde", "-o", "p.db", "--paused", "paused.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    db = tmp_path / "p.db"
    # No import machinery, no <module>: only the calls made between start() and stop().
    assert query(db, "SELECT DISTINCT r.name FROM nodes n JOIN routines r USING (routine_id) "
                     "WHERE r.kind = 'python'") == [("paused.py:3(work)",)]
    paths = dict(query(db, "SELECT path, calls FROM callpaths WHERE path LIKE '%sgemm'"))
    # Native calls are recorded throughout: before start() and after stop() under the root.
    assert paths == {"paused.py:3(work);cblas_sgemm": 3, "cblas_sgemm": 2}, paths
    r = run(["-m", "sonde", "-o", "q.db", "paused.py"], tmp_path)
    assert query(tmp_path / "q.db", "SELECT COUNT(*) FROM routines WHERE kind = 'python' AND "
                                    "name = '<import>'")[0][0] > 0


@pytest.mark.parametrize("opts", [["--paused", "--lines", "wor*"], ["--pau", "--line=wor*"],
                                  ["--lin", "wor*", "--paused", "--out", "p.db"]])
def test_second_interpreter_takes_the_options_the_launcher_accepted(tmp_path, opts):
    """The second interpreter reads --paused and --lines without argparse: long options
    abbreviated and written with '=' as argparse took them."""
    (tmp_path / "paused.py").write_text(PAUSED)
    r = run(["-m", "sonde", "-o", "p.db", *opts, "paused.py"], tmp_path)
    assert r.returncode == 0, r.stderr
    db = tmp_path / "p.db"
    names = {n for n, in query(db, "SELECT DISTINCT r.name FROM nodes n JOIN routines r "
                                   "USING (routine_id) WHERE r.kind = 'python'")}
    # Paused: no <module>, no import; work() recorded after start().
    assert "paused.py:3(work)" in names and not [n for n in names if "<" in n], names
    # work's one line, hit once per call between start() and stop().
    assert query(db, "SELECT l.line, SUM(l.hits) FROM line_costs l JOIN routines r "
                     "USING (routine_id) WHERE r.name = 'paused.py:3(work)' GROUP BY l.line") == \
        [(4, 3)]


BUSY = """\
import numpy as np
def work():
    s = 0
    for i in range(300000):
        s += i * i
    return s
a = np.ones((64, 64), dtype=np.float32)
for _ in range(3):
    work(); a.dot(a)
print("ok")
"""


def test_measurement_flags_reach_the_run(tmp_path):
    """--sample, --counters and --delay are sonde run's, passed on: samples, counters and the
    window's setting are in the profile (the program's output unchanged)."""
    (tmp_path / "busy.py").write_text(BUSY)
    r = run(["-m", "sonde", "-o", "f.db", "--sample", "1000", "--delay", "0.01",
             "--counters", "perf::TASK-CLOCK", "busy.py"], tmp_path)
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    db = tmp_path / "f.db"
    info = dict(query(db, "SELECT key, value FROM run_info WHERE key IN "
                          "('sample.hz', 'env.SONDE_DELAY', 'env.SONDE_COUNTERS')"))
    assert info == {"sample.hz": "1000", "env.SONDE_DELAY": "0.01",
                    "env.SONDE_COUNTERS": "perf::TASK-CLOCK"}, info
    assert query(db, "SELECT COUNT(*) FROM samples")[0][0] > 0
    assert query(db, "SELECT COUNT(*) FROM node_counters")[0][0] > 0


def test_cprofile_under_sonde_keeps_both_files(tmp_path):
    """python3 -m sonde -o a.db -m cProfile -o c.prof x.py: -o after the module is cProfile's,
    so both profilers write their own file, and sonde's tree holds cProfile's frames."""
    import pstats
    (tmp_path / "busy.py").write_text(BUSY)
    r = run(["-m", "sonde", "-o", "a.db", "-m", "cProfile", "-o", "c.prof", "busy.py"], tmp_path)
    assert (r.returncode, r.stdout) == (0, "ok\n"), r.stderr
    stats = pstats.Stats(str(tmp_path / "c.prof"))
    assert any(fn == "work" for (_, _, fn) in stats.stats), list(stats.stats)[:5]
    names = [n for (n,) in query(tmp_path / "a.db", "SELECT name FROM routines WHERE kind = 'python'")]
    assert any(n.startswith("cProfile.py:") for n in names), names
    assert any(n.endswith("(work)") for n in names), names


def isolated_pythons():
    """Debian's 3.11 and pyenv's CPythons whose extension the build made, each as its own id."""
    found = [PY] + sorted(p for p in glob.glob(os.path.expanduser(
        "~/.pyenv/versions/3.1*/bin/python3.1?")) if re.search(r"3\.1\d$", p))
    out = []
    for py in found:
        r = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_config_var("
                                      "'EXT_SUFFIX'), end='')"], capture_output=True, text=True)
        if r.returncode == 0 and os.path.exists(os.path.join(PYTHONPATH, "sonde",
                                                             "_sonde" + r.stdout)):
            out.append(pytest.param(py, id=os.path.basename(py) + ("-debian" if py == PY else "")))
    return out


@pytest.mark.parametrize("python", isolated_pythons())
@pytest.mark.parametrize("mode", MODES, ids=["reexec", "in-process"])
def test_isolated_mode_adds_no_script_folder(tmp_path, python, mode):
    # python -I puts neither the script's folder nor the cwd on sys.path, so a json.py beside
    # the script cannot shadow the standard library's. On 3.10 (whose -I sets no safe_path flag)
    # sonde put the folder first, and the local json.py was imported. -I ignores PYTHONPATH: the
    # package is found as an installed one, through a .pth file in a venv's site-packages.
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", venv], check=True)
    site = next(venv.glob("lib/python3.*/site-packages"))
    (site / "sonde-build.pth").write_text(PYTHONPATH + "\n")
    work = tmp_path / "work"
    work.mkdir()
    (work / "json.py").write_text("print('the local json.py')\n")
    (work / "main.py").write_text("import json, sys\nprint(json.__name__, sys.path[0])\n")
    vpy = venv / "bin" / "python"
    plain = subprocess.run([vpy, "-I", "main.py"], cwd=work, capture_output=True, text=True,
                           env=clean_env(), timeout=60)
    s = subprocess.run([vpy, "-I", "-m", "sonde", *mode, "-o", "s.db", "main.py"], cwd=work,
                       capture_output=True, text=True, env=clean_env(), timeout=120)
    assert plain.returncode == 0 and "local" not in plain.stdout, plain
    assert (s.returncode, s.stdout) == (0, plain.stdout), s.stderr


@pytest.mark.parametrize("python", sorted(glob.glob(os.path.expanduser(
    "~/.pyenv/versions/3.[6-9].*/bin/python3.[6-9]"))) or [pytest.param(
        None, marks=pytest.mark.skip(reason="no CPython before 3.10 here"))])
def test_an_interpreter_older_than_310_is_refused_without_a_wheel_to_seek(tmp_path, python):
    # It was told to install "the sonde wheel built for cp39", which no build makes.
    (tmp_path / "script.py").write_text("print('ran')\n")
    r = subprocess.run([python, "-m", "sonde", "-o", "p.db", "script.py"], cwd=tmp_path,
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "supports CPython 3.10 to 3.13" in lines[0] and "wheel" not in lines[0], lines
    assert not list(tmp_path.glob("*.db")) and "ran" not in r.stdout


@pytest.mark.parametrize("mode", MODES, ids=["reexec", "in-process"])
def test_a_child_interpreters_sys_path_is_its_own_behind_the_autostart_folder(tmp_path, mode):
    # The launcher put the package's folder on PYTHONPATH before the user's: a child imported
    # a venv's installed copy of a module the user's PYTHONPATH held, and a site-packages
    # backport over the standard library's module (a red-team find). Now only the autostart
    # folder comes first; the rest of a child's sys.path is what it is without sonde.
    mylib = tmp_path / "mylib"
    mylib.mkdir()
    (tmp_path / "parent.py").write_text(
        "import json, subprocess, sys\n"
        "r = subprocess.run([sys.executable, '-c', 'import json, sys; print(json.dumps(sys.path))'],"
        " capture_output=True, text=True)\n"
        "print(r.stdout, end='')\n")
    path = f"{mylib}{os.pathsep}{PYTHONPATH}"
    plain = run(["parent.py"], tmp_path, PYTHONPATH=path)
    s = run(["-m", "sonde", *mode, "-o", "s.db", "parent.py"], tmp_path, PYTHONPATH=path)
    assert plain.returncode == 0 and s.returncode == 0, s.stderr
    child = json.loads(s.stdout)
    autostart = os.path.join(PYTHONPATH, "sonde", "autostart")
    assert child[1] == autostart, child
    assert [p for p in child if p != autostart] == json.loads(plain.stdout)


LAUNCHES = [[], ["--re-exec"]]


@pytest.mark.parametrize("launch", LAUNCHES, ids=["in-process", "re-exec"])
def test_a_script_run_through_a_link_imports_the_modules_beside_its_target(tmp_path, launch):
    # sys.path[0] was the link's folder: `import helper` failed under sonde where python, which
    # puts the folder of the link's target first, ran it (a red-team find).
    (tmp_path / "proj").mkdir()
    (tmp_path / "bin").mkdir()
    (tmp_path / "proj" / "helper.py").write_text("def f():\n    return 'helper ok'\n")
    (tmp_path / "proj" / "tool.py").write_text("import helper\nprint(helper.f())\n")
    (tmp_path / "bin" / "tool.py").symlink_to("../proj/tool.py")
    plain = run(["bin/tool.py"], tmp_path)
    r = run(["-m", "sonde", *launch, "-o", "p.db", "bin/tool.py"], tmp_path)
    assert (r.returncode, r.stdout) == (plain.returncode, plain.stdout) == (0, "helper ok\n"), \
        r.stderr


@pytest.mark.parametrize("launch", LAUNCHES, ids=["in-process", "re-exec"])
@pytest.mark.parametrize("name", ["/dev/stdin", "-"])
def test_a_script_on_a_pipe_runs_as_python_runs_it(tmp_path, launch, name):
    # `cat s.py | python -m sonde /dev/stdin` (and `<(...)`, and `-`) was refused: "cannot open
    # script /dev/stdin: no such file", where python ran it (a red-team find).
    source = "import sys\nprint(sys.argv[0], __file__, sys.path[0] == '/dev' or sys.path[0])\n"
    feed = dict(input=source, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                env=clean_env(PYTHONPATH=PYTHONPATH))
    plain = subprocess.run([PY, name], **feed)
    r = subprocess.run([PY, "-m", "sonde", *launch, "-o", "p.db", name], **feed)
    assert plain.returncode == 0 and (r.returncode, r.stdout) == (0, plain.stdout), r.stderr
    assert query(tmp_path / "p.db", "SELECT COUNT(*) FROM processes") == [(1,)]


def test_a_relative_output_in_a_removed_folder_is_refused_in_one_line(tmp_path):
    # A shell left in a folder since removed: a Python traceback (python3 -m sonde) and an
    # internal error (sonde run); an absolute -o works there (a red-team find).
    (tmp_path / "s.py").write_text("print('ran')\n")
    gone = tmp_path / "gone"
    gone.mkdir()
    script = tmp_path / "s.py"
    cmds = {"python3 -m sonde": [PY, "-m", "sonde", str(script)],
            "sonde run": [CLI, "run", "--", PY, str(script)]}
    for who, cmd in cmds.items():
        r = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$@"', "sh", *cmd],
                           env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                           timeout=120)
        gone.mkdir()
        assert r.returncode != 0 and r.stdout == "", (who, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(who + ": cannot place the profile"), \
            (who, r.stderr)
        assert lines[0].endswith("give -o an absolute path"), r.stderr
    r = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$@"', "sh", PY,
                        "-m", "sonde", "-o", str(tmp_path / "p.db"), str(script)],
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=120)
    assert (r.returncode, r.stdout) == (0, "ran\n"), r.stderr
    # -m there: python -m puts no folder first when getcwd fails; sonde's own getcwd stopped
    # the program with a bare FileNotFoundError (a red-team find).
    (tmp_path / "mod_here.py").write_text("import sys\nprint('ran', sys.path[0])\n")
    gone.mkdir()
    for cmd in ([PY, "-m", "mod_here"],
                [PY, "-m", "sonde", "-o", str(tmp_path / "m.db"), "-m", "mod_here"]):
        r = subprocess.run(["sh", "-c", f'cd "{gone}" && rmdir "{gone}" && exec "$@"', "sh",
                            *cmd], env=clean_env(PYTHONPATH=f"{tmp_path}:{PYTHONPATH}"),
                           capture_output=True, text=True, timeout=120)
        gone.mkdir()
        assert (r.returncode, r.stdout) == (0, f"ran {tmp_path}\n"), (cmd, r.stderr)


def test_a_programs_own_sonde_module_is_said_to_be_shadowed(tmp_path):
    # A radiosonde project's sonde.py beside its script: its `import sonde` gets the profiler's
    # package, and it failed on an AttributeError with no word of why (a red-team find). One
    # line on stderr says so; a program without one hears nothing.
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "sonde.py").write_text("def altitude():\n    return 1234\n")
    (tmp_path / "app" / "main.py").write_text("import sonde\nprint(hasattr(sonde, 'altitude'))\n")
    r = run(["-m", "sonde", "-o", "p.db", str(tmp_path / "app" / "main.py")], tmp_path)
    assert (r.returncode, r.stdout) == (0, "False\n"), r.stderr
    said = [l for l in r.stderr.splitlines() if "sonde.py is not what its `import sonde`" in l]
    assert len(said) == 1 and str(tmp_path / "app" / "sonde.py") in said[0], r.stderr
    (tmp_path / "app" / "sonde.py").unlink()
    (tmp_path / "app" / "main.py").write_text("print('ran')\n")
    r = run(["-m", "sonde", "-o", "q.db", str(tmp_path / "app" / "main.py")], tmp_path)
    assert r.returncode == 0 and "is not what its" not in r.stderr, r.stderr


def test_an_output_given_as_o_equals_is_named_as_argparse_reads_it(tmp_path):
    # `-o=eq.db` wrote "=eq.db": the launcher's quick scan kept the "=" that argparse (and
    # so --help's `-o OUTPUT`) drops (a red-team find).
    (tmp_path / "s.py").write_text("print('ran')\n")
    r = run(["-m", "sonde", "-o=eq.db", "-s=calls", "s.py"], tmp_path)
    assert (r.returncode, r.stdout.splitlines()[0]) == (0, "ran"), r.stderr
    assert sorted(p.name for p in tmp_path.glob("*eq.db")) == ["eq.db"]


@pytest.mark.parametrize("launch", LAUNCHES, ids=["in-process", "re-exec"])
def test_a_bad_window_option_is_a_usage_error_named_by_the_option_typed(tmp_path, launch):
    # `python3 -m sonde --steps x` said "ignoring SONDE_STEPS='x'", a variable the user never
    # set (a red-team find), and then profiled the whole run: a typo in --delay or --steps
    # measured the start-up the option was there to leave out (another). One line, exit 2,
    # nothing run; sonde run likewise. A variable set in the environment still falls back.
    (tmp_path / "s.py").write_text("print('ran')\n")
    # "1e3": sonde run took it for 1000 steps, which the library then refused as no whole number.
    for option, value in (("--steps", "x"), ("--delay", "abc"), ("--sample", "99999"),
                          ("--steps", "1e3")):
        r = run(["-m", "sonde", *launch, "-o", "p.db", "--force", option, value, "s.py"], tmp_path)
        assert (r.returncode, r.stdout) == (2, ""), r.stderr
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"python3 -m sonde: {option} {value}: "), \
            r.stderr
        assert "SONDE_" not in lines[0], r.stderr
        r = subprocess.run([CLI, "run", "-o", str(tmp_path / "q.db"), "--force", option, value,
                            "--", "true"], env=clean_env(), capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2 and r.stderr.startswith(f"sonde run: {option}: '{value}' is "), \
            r.stderr
    r = run(["-m", "sonde", *launch, "-o", "p.db", "--force", "s.py"], tmp_path,
            SONDE_STEPS="x")
    assert (r.returncode, r.stdout) == (0, "ran\n"), r.stderr
    assert "ignoring SONDE_STEPS='x'" in r.stderr, r.stderr
