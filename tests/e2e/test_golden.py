"""Golden outputs, as uftrace's tests keep them: each tiny program below runs once under sonde,
and what `sonde tree`, `sonde report --format csv` and the exports print of its profile, once
normalised (golden_normalise.py: times, ids and paths out, rows in a fixed order), must equal the
file golden/<program>.<output>. A change of structure or counts shows as a unified diff.

SONDE_UPDATE_GOLDEN=1 rewrites the files instead of comparing (docs/testing.md). Only programs
whose counts do not depend on timing or scheduling are here: docs/testing.md lists those left
out and why."""
import difflib
import importlib.util
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import golden_normalise as normalise
from conftest import BIN, CLI, LIB, MLP, run

HERE = Path(__file__).parent
GOLDEN = HERE / "golden"
PROGRAMS = HERE / "programs"
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
UPDATE = os.environ.get("SONDE_UPDATE_GOLDEN") == "1"
MPIRUN = shutil.which("mpirun")

ALL = ("tree", "report.csv", "callpaths.csv", "callgrind", "pstats", "folded")
# folded leaves out a call path whose exclusive time rounds to 0 us (golden_normalise.folded):
# the programs whose paths all take well over that have it, the others not.
NO_FOLDED = ALL[:-1]


@dataclass
class Program:
    name: str
    argv: list  # a native program's path and arguments, or a Python script's
    python: bool = False
    ranks: int = 0  # under mpirun -np RANKS, the ranks' files merged by sonde merge
    outputs: tuple = ALL
    own: set = field(default_factory=set)  # the program's own files (rule 6)
    status: int = 0  # sonde run's exit status: the program's, -N where a signal N killed it
    needs: str = ""  # a module or file without which the program cannot run here

    def missing(self):
        """Why this program cannot run on this machine (a GPU stub build, torch), or ''."""
        if self.python and self.needs and importlib.util.find_spec(self.needs) is None:
            return f"no {self.needs} module"
        if not self.python and not Path(self.argv[0]).is_file():
            return f"{self.argv[0]} not built"
        if self.ranks and MPIRUN is None:
            return "no mpirun"
        return ""


PROGRAMS_RUN = [
    # Regions around a fake BLAS whose cblas_dgemm calls dgemm_ (one call, not two).
    Program("known_time", [BIN / "known_time", 5, 200, 5]),
    # Region names with markup, quotes and the folded format's separator.
    Program("named_regions", [BIN / "named_regions", "plain", "<b>&amp;", 'say "hi"', "a;b"]),
    # NVTX v2: push/pop nested, a start/end range, a pop with nothing open.
    Program("nvtx_ranges", [BIN / "nvtx_ranges"], outputs=NO_FOLDED),
    # fork (exit, _exit), exec and two threads: one tree per thread of every process.
    Program("process_tree", [BIN / "process_tree"], outputs=NO_FOLDED),
    # posix_spawn with and without sonde's environment.
    Program("spawn_env", [BIN / "spawn_env"], outputs=NO_FOLDED),
    # First-touched pages and a loop inside two regions, no intercepted call.
    Program("page_touch", [BIN / "page_touch", 200]),
    # Three threads of 100 BLAS calls each, a tree each; the main thread makes none.
    Program("blas_threads", [BIN / "blas_threads", 3, 100], outputs=NO_FOLDED),
    # abort() after 10 calls: what the flush at SIGABRT keeps.
    Program("misbehave_abort", [BIN / "misbehave", "abort"], outputs=NO_FOLDED, status=-6),
    # CUDA runtime and driver, cuBLAS, cuDNN and NCCL against the stub libraries (no GPU).
    Program("gpu_calls", [BIN / "gpu_calls"], outputs=NO_FOLDED),
    # Two MPI ranks, their files merged: point-to-point, collectives and regions per step.
    Program("mpi_calls", [BIN / "mpi_calls", "--steps", 3, "--regions"], ranks=2,
            outputs=NO_FOLDED),
    # The C++ reference workload: every GEMM of a small MLP and Adam, by call path.
    Program("mlp_train", [MLP, "--steps", 3, "--hidden", 64, "--eval-every", 0],
            outputs=NO_FOLDED),
    # Python frames, numpy's GEMMs under them, a function whose name is HTML.
    Program("export_workload", [PROGRAMS / "export_workload.py", 100], python=True,
            outputs=NO_FOLDED, own={"export_workload.py"}),
    # Chainer's define-by-run shape: the structure tells forward, backward and update apart.
    Program("define_by_run", [PROGRAMS / "define_by_run.py", 3], python=True,
            outputs=NO_FOLDED, own={"define_by_run.py"}),
    # torch's operators and autograd nodes (RecordFunction) among the Python frames, oneDNN and
    # BLAS under them: three steps of a small CNN on one thread.
    Program("torch_op_counts", [PROGRAMS / "torch_op_counts.py"], python=True,
            outputs=("tree", "report.csv"), own={"torch_op_counts.py"}, needs="torch"),
]


def profile(program, db):
    """Runs the program under sonde (sonde run, or python3 -m sonde) into db."""
    if program.python:
        cmd = ["/usr/bin/python3", "-m", "sonde", "-o", db, *program.argv]
        r = run(cmd, PYTHONPATH=PYTHONPATH, OPENBLAS_NUM_THREADS=1)
    elif program.ranks:
        mpirun = [MPIRUN, "--oversubscribe", "--allow-run-as-root", "-np", program.ranks]
        r = run(mpirun + [CLI, "run", "-o", db, "--", *program.argv], SONDE_LIBRARY=LIB,
                OPENBLAS_NUM_THREADS=1)
        assert r.returncode == program.status, r.stderr
        ranks = sorted(db.parent.glob("prof.rank*.db"))
        assert len(ranks) == program.ranks, ranks
        r = run([CLI, "merge", "-o", db, *ranks])
    else:
        r = run([CLI, "run", "-o", db, "--", *program.argv], OPENBLAS_NUM_THREADS=1)
    assert r.returncode == program.status, r.stderr
    return db


@pytest.fixture(scope="module")
def profiles(tmp_path_factory):
    """Each program's profile, made the first time a test asks for it."""
    made = {}

    def get(program):
        if program.name not in made:
            db = tmp_path_factory.mktemp(program.name) / "prof.db"
            made[program.name] = profile(program, db)
        return made[program.name]
    return get


def output(db, what, own):
    """The normalised text of one output of the profile db."""
    commands = {
        "tree": (["tree", db, "--min-pct", 0], normalise.tree),
        "report.csv": (["report", db, "--format", "csv"], normalise.report_csv),
        "callpaths.csv": (["export", db, "--format", "csv"], normalise.callpaths_csv),
        "callgrind": (["export", db, "--format", "callgrind"], normalise.callgrind),
        "folded": (["export", db, "--format", "folded"], normalise.folded),
    }
    if what == "pstats":
        out = db.with_suffix(".pstats")
        r = run([CLI, "export", db, "--format", "pstats", "-o", out])
        assert r.returncode == 0, r.stderr
        return normalise.pstats_file(out, own)
    args, norm = commands[what]
    r = run([CLI, *args])
    assert r.returncode == 0, r.stderr
    return norm(r.stdout, own)


def compare(golden, actual):
    """Fails with a unified diff of the golden file against what this run printed."""
    if UPDATE:
        golden.write_text(actual)
        return
    if not golden.exists():
        pytest.fail(f"{golden} does not exist: SONDE_UPDATE_GOLDEN=1 writes it", pytrace=False)
    expected = golden.read_text()
    if actual != expected:
        diff = difflib.unified_diff(expected.splitlines(keepends=True),
                                    actual.splitlines(keepends=True),
                                    fromfile=str(golden.relative_to(HERE)), tofile="this run")
        pytest.fail("output differs from the golden file (SONDE_UPDATE_GOLDEN=1 rewrites it):\n"
                    + "".join(diff), pytrace=False)


CASES = [(p, what) for p in PROGRAMS_RUN for what in p.outputs]


@pytest.mark.parametrize("program,what", CASES, ids=[f"{p.name}.{w}" for p, w in CASES])
def test_golden(profiles, program, what):
    if program.missing():
        pytest.skip(program.missing())
    compare(GOLDEN / f"{program.name}.{what}", output(profiles(program), what, program.own))


def test_every_golden_file_has_its_case():
    """A golden file no case reads would pass unnoticed forever: one for each case, no more."""
    expected = {f"{p.name}.{w}" for p, w in CASES}
    assert {f.name for f in GOLDEN.iterdir()} == expected


# --- the normaliser's own rules, on text written here --------------------------------------------

TREE = """process 41, thread 0 (tid 41) "prog": 0.250 s = 100 % (this thread's time)
  incl %     incl s     excl s       calls  name
  100.0%      0.250      0.010           1  <thread> [root]
   70.0%      0.175      0.005           1  ├─ zeta [region]
   68.0%      0.170      0.170           3  │  └─ cblas_sgemm [blas]
   26.0%      0.065      0.065           2  └─ alpha.py:12(f) [python]

idle threads (no measured call; in no percentage): thread 1 (pid 41, tid 43)
"""


def test_normalised_tree_keeps_counts_and_shape_only():
    """Times, ids and the time order go; a sibling's count and its place in the tree stay."""
    assert normalise.tree(TREE, own={"alpha.py"}) == (
        "idle threads (no measured call; in no percentage): thread 1 (pid, tid)\n\n"
        'process, thread 0 "prog"\n'
        "     calls  name\n"
        "         1  <thread> [root]\n"
        "         2  ├─ alpha.py:12(f) [python]\n"
        "         1  └─ zeta [region]\n"
        "         3     └─ cblas_sgemm [blas]\n")
    slower = TREE.replace("0.170      0.170", "0.900      0.900").replace("(tid 41)", "(tid 9)")
    assert normalise.tree(slower) == normalise.tree(TREE)
    assert normalise.tree(TREE.replace("     3  │", "     4  │")) != normalise.tree(TREE)


def test_line_numbers_stay_in_the_programs_own_files_only():
    assert normalise.frame("alpha.py:12(f) [python]", {"alpha.py"}) == "alpha.py:12(f) [python]"
    assert normalise.frame("threading.py:1534(_shutdown)", {"alpha.py"}) == \
        "threading.py:?(_shutdown)"
    assert normalise.path("/usr/lib/python3.11/x.py:3(g);cblas_sgemm", set()) == \
        "x.py:?(g);cblas_sgemm"
