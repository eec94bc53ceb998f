"""PyTorch's operators and torch.distributed's collectives through RecordFunction
(wrappers/torch/, docs/torch.md), on Debian's torch 1.13 and its Python."""
import json
import os
import socket
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import CLI, clean_env, integrity_ok, query

PY = "/usr/bin/python3"  # Debian's, the one python3-torch is built for
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
PROGRAMS = Path(__file__).parent / "programs"
TRAIN = PROGRAMS / "torch_op_counts.py"
DDP = PROGRAMS / "torch_ddp.py"


def have_torch():
    r = subprocess.run([PY, "-c", "import torch"], capture_output=True)
    return r.returncode == 0


pytestmark = pytest.mark.skipif(not have_torch(), reason="python3-torch is not installed")


def sonde_py(args, db, cwd, timeout=300, **env):
    return subprocess.run([PY, "-m", "sonde", "-o", str(db), *map(str, args)],
                          env=clean_env(PYTHONPATH=PYTHONPATH, **env), capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)


def torch_counts(db):
    return dict(query(db, "SELECT r.name, SUM(n.calls) FROM nodes n JOIN routines r "
                          "USING (routine_id) WHERE r.kind = 'torch' GROUP BY r.name"))


@pytest.fixture(scope="module")
def train(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("train")
    plain = subprocess.run([PY, TRAIN], capture_output=True, text=True, env=clean_env())
    # torch.profiler's reference, twice: beside a CPU hog 1.13's legacy profiler now and then
    # records an event more (a nested aten::sum of a .sum(), 2 runs in 24, before the program
    # stopped summing there), which one run would read as sonde missing a call. Each
    # operator's lower count is the reference.
    refs = []
    for i in range(2):
        counts = tmp / f"counts{i}.json"
        ref = subprocess.run([PY, TRAIN, "--profiler", counts], capture_output=True, text=True,
                             env=clean_env())
        assert ref.returncode == 0, ref.stderr
        refs.append(json.loads(counts.read_text()))
    profiler = {n: min(r.get(n, 0) for r in refs) for n in refs[0].keys() | refs[1].keys()}
    db = tmp / "prof.db"
    r = sonde_py([TRAIN], db, tmp)
    assert r.returncode == 0, r.stderr
    return {"plain": plain, "run": r, "db": db, "profiler": profiler, "ref": ref}


def test_results_unchanged(train):
    assert train["run"].stdout == train["plain"].stdout == train["ref"].stdout
    assert integrity_ok(train["db"])


def test_operators_between_python_frames_and_library_calls(train):
    paths = [p for (p,) in query(train["db"], "SELECT path FROM callpaths")]
    native = ("sgemm_", "cblas_sgemm", "dnnl")

    def under(op):
        for p in paths:
            frames = p.split(";")
            if op in frames[:-1] and frames[-1].startswith(native):
                i = frames.index(op)
                yield frames[i - 1], frames[-1]

    # Forward: the Python frame that called the operator, then the operator, then oneDNN/BLAS.
    conv = list(under("aten::conv2d"))
    assert conv and all(caller.startswith("conv.py:") for caller, _ in conv), conv
    assert any(caller.startswith("linear.py:") for caller, _ in under("aten::linear"))
    # Backward: the autograd node, then the operators its formula calls, then the library.
    assert any(caller == "AddmmBackward0" for caller, _ in under("aten::mm"))
    assert list(under("aten::convolution_backward"))


def test_operators_the_autograd_engine_calls_are_under_its_frame(train):
    paths = {p for (p,) in query(train["db"], "SELECT path FROM callpaths")}
    engine = "autograd::engine::evaluate_function: "

    def parents(op):
        return {p.split(";")[-2] for p in paths if p.endswith(";" + op)}

    assert any(q.startswith(engine) for q in parents("aten::add")), parents("aten::add")
    assert any(q.startswith(engine) for q in parents("aten::sum")), parents("aten::sum")
    # The hook's own operator, beneath its Python frame, beneath the engine's frame.
    hooked = [p for p in paths if p.endswith("(<lambda>);aten::mul")]
    assert hooked and all(engine in p for p in hooked), hooked


def test_backward_products_are_placed_at_their_autograd_node(train):
    # A backward GEMM's nearest Python frame is autograd's own backward() (__init__.py), which
    # says nothing of which layer's gradient it is: its call site is the node it computes.
    sites = {site for (site,) in query(train["db"], "SELECT DISTINCT call_site FROM gemm_shapes")}
    assert {"AddmmBackward0", "ConvolutionBackward0"} <= sites, sites
    assert not [s for s in sites if s.endswith("(backward)")], sites
    assert any(s.startswith("linear.py:") for s in sites), sites  # the forward's, as before


def test_kind_and_no_duplicate_regions(train):
    kinds = dict(query(train["db"], "SELECT name, kind FROM routines WHERE name IN "
                                    "('aten::conv2d', 'Optimizer.step#Adam.step')"))
    # record_function ranges stay the Python hook's regions, never a torch frame as well.
    assert kinds == {"aten::conv2d": "torch", "Optimizer.step#Adam.step": "region"}


def test_torchscript_compiles_record_function_under_sonde(tmp_path):
    # record_function's __enter__/__exit__ are sonde's C hooks, which TorchScript cannot read
    # the source of: torch.jit.script of any code opening one failed under sonde ("Cannot
    # instantiate class 'record_function'", a red-team find). The class is compiled for
    # TorchScript from its own methods before the hooks go in: scripted code runs as without
    # sonde, and the eager ranges are still regions.
    prog = tmp_path / "scripted.py"
    prog.write_text(textwrap.dedent("""\
        import torch
        from torch.autograd.profiler import record_function

        class M(torch.nn.Module):
            def forward(self, x):
                with record_function("scripted_range"):
                    return x.relu() * 2

        @torch.jit.script
        def f(x):
            with record_function("scripted_fn"):
                return x + 1

        m = torch.jit.script(M())
        with record_function("eager_range"):
            y = m(torch.ones(2)) + f(torch.ones(2))
        print(y.tolist())
    """))
    plain = subprocess.run([PY, prog], cwd=tmp_path, capture_output=True, text=True,
                           timeout=300, env=clean_env())
    db = tmp_path / "scripted.db"
    r = subprocess.run([PY, "-m", "sonde", "-o", db, prog], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, env=clean_env(PYTHONPATH=PYTHONPATH))
    assert plain.returncode == 0 and plain.stdout == "[4.0, 4.0]\n", plain.stderr
    assert r.returncode == 0 and r.stdout == plain.stdout, r.stderr
    assert query(db, "SELECT calls FROM hotspots WHERE routine = 'eager_range' "
                     "AND kind = 'region'") == [(1,)]
    # The range's own __enter__ and __exit__ are inside it, as in torch.profiler's range
    # (its RecordFunction starts in the one and ends in the other): a red-team DataLoader's
    # __exit__ took 1.3 ms a batch, outside the region until 2026-12-06.
    paths = [p for (p,) in query(db, "SELECT path FROM callpaths")]
    beneath = {p.split(";eager_range;", 1)[1] for p in paths if ";eager_range;" in p}
    beneath = {f for f in beneath if ";" not in f}  # the region's children
    assert any(f.endswith("(__enter__)") for f in beneath), beneath
    assert any(f.endswith("(__exit__)") for f in beneath), beneath


def test_counts_match_torch_profiler(train):
    sonde, prof = torch_counts(train["db"]), train["profiler"]
    # Every autograd node, and the operators the model's modules call from Python, which no
    # other operator calls: sonde's count is torch.profiler's.
    nodes = [n for n in prof if n.startswith("autograd::") or "Backward" in n or
             n.endswith("AccumulateGrad")]
    assert len(nodes) >= 18, nodes
    exact = nodes + [
        "aten::conv2d", "aten::relu", "aten::max_pool2d", "aten::flatten", "aten::linear",
        "aten::cross_entropy_loss", "aten::ones_like", "aten::addcdiv_", "aten::addcmul_",
        "aten::sqrt",
        # Called by the autograd engine itself, outside the node it evaluates: the shared
        # layer's gradients accumulated (add), a bias gradient summed to its shape (sum, view);
        # and by the hook on the logits' gradient (mul). None was counted before (a red-team
        # find: an LSTM's aten::add 10 of 2,490).
        "aten::add", "aten::sum", "aten::mul",
        # Called by Python code that an operator runs: a custom autograd.Function's forward
        # (aten::tanh), a checkpointed layer's forward (three of aten::linear's, under the
        # CheckpointFunction operator; its recomputation in backward runs under an autograd
        # node). Not counted before: aten::linear 12 of 15. But the operator a tensor subclass's
        # __torch_dispatch__ calls is its operator's implementation: one aten::mm, not two.
        "Squash", "CheckpointFunction", "aten::tanh", "aten::mm",
        # Called by autograd's C++ beneath a Function's event once its forward has returned:
        # the view of an output that is an input (a red-team find: 0 of 60 counted).
        "Same", "aten::view_as"]
    assert {n: sonde.get(n) for n in exact} == {n: prof[n] for n in exact}
    # The engine's aten::view likewise, less the one each aten::view_as calls (its own).
    assert sonde["aten::view"] == prof["aten::view"] - prof["aten::view_as"] > 0
    # An operator's Python kernel is its implementation, however many events down: the custom
    # Function it applies and that Function's operators are not top-level (they were, beneath
    # the kernel, when the Function stood between: a red-team find).
    assert sonde.get("sonde_test::doubled") == prof["sonde_test::doubled"] == 1
    assert (sonde.get("Doubled"), sonde.get("aten::exp")) == (None, None)
    assert prof["Doubled"] == prof["aten::exp"] == 1
    # Other operators are also called by operators, where sonde does not count them (the
    # caller's time holds them): never more than torch.profiler's count.
    over = {n: (c, prof.get(n)) for n, c in sonde.items() if c > prof.get(n, 0)}
    assert not over, over


def test_paused_sees_the_operators_a_functions_forward_calls(tmp_path):
    # --paused records no Python frame until sonde.start(): that Python ran inside the
    # Function's event is told by the interpreter's own innermost frame, not by sonde's frames
    # (before, these aten::linear were nested in CheckpointFunction and not counted).
    prog = tmp_path / "paused.py"
    prog.write_text(
        "import torch, sonde\n"
        "from torch.utils.checkpoint import checkpoint\n"
        "torch.manual_seed(0)\n"
        "lin = torch.nn.Linear(4, 4)\n"
        "x = torch.randn(2, 4, requires_grad=True)\n"
        "for _ in range(3):\n"
        "    lin(x)\n"
        "    checkpoint(lin, x, use_reentrant=True)\n"
        "sonde.start()\n")
    db = tmp_path / "paused.db"
    r = subprocess.run([PY, "-m", "sonde", "--paused", "-o", str(db), str(prog)],
                       env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    paths = dict(query(db, "SELECT path, calls FROM callpaths WHERE path LIKE '%aten::linear'"))
    assert paths == {"aten::linear": 3, "CheckpointFunction;aten::linear": 3}, paths


def test_switched_off(tmp_path):
    db = tmp_path / "off.db"
    r = sonde_py([TRAIN], db, tmp_path, SONDE_TORCH_OPS=0)
    assert r.returncode == 0, r.stderr
    assert torch_counts(db) == {}


def test_profiler_step_leaves_the_loop_where_it_is(tmp_path):
    # PyTorch's tutorial loop: torch.profiler with a schedule and prof.step(), which enters
    # each step's range (ProfilerStep#N) and returns. Its return closed the range instead of
    # step(), which stayed open: every later call nested one step() deeper, the teardown too.
    script = tmp_path / "prof_step.py"
    script.write_text(
        "import torch\n"
        "from torch import nn\n"
        "def main():\n"
        "    torch.manual_seed(0)\n"
        "    net = nn.Linear(16, 4)\n"
        "    x = torch.randn(8, 16)\n"
        "    sched = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)\n"
        "    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],\n"
        "                                schedule=sched) as prof:\n"
        "        for _ in range(6):\n"
        "            net(x).sum().backward()\n"
        "            prof.step()\n"
        "    print(float(torch.ones(50, 50).exp().sum()))\n"
        "main()\n")
    db = tmp_path / "prof.db"
    r = sonde_py([script], db, tmp_path, OMP_NUM_THREADS=1)
    assert r.returncode == 0, r.stderr
    assert "did not match" not in r.stderr
    paths = [p for (p,) in query(db, "SELECT path FROM callpaths")]
    steps = [p for p in paths if p.endswith("(step)")]
    assert steps and all(p.count("(step)") <= 1 for p in paths), steps
    exp = [p for p in paths if p.endswith("aten::exp")]
    assert len(exp) == 1 and exp[0].split(";")[-2].endswith("(main)"), exp
    assert query(db, "SELECT COUNT(*) FROM nodes n JOIN routines r USING (routine_id) "
                     "WHERE r.name = '<interpreter teardown>' AND n.depth = 1") == [(1,)]
    # The step ranges, ProfilerStep#1 to #6 (and the one profile() opens), are one region: one
    # routine a step made a 5,000-step run's report 5,000 lines of 0.000 ms.
    assert query(db, "SELECT r.name, SUM(n.calls) FROM nodes n JOIN routines r "
                     "USING (routine_id) WHERE r.name LIKE 'ProfilerStep#%' GROUP BY r.name") \
        == [("ProfilerStep#*", 7)]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawned(tmp_path, program, **env):
    """python3 -m sonde on a program that starts its gloo ranks with torch.multiprocessing.spawn
    (its one argument: a free port); returns the profile's path and the ranks' output lines."""
    db = tmp_path / "prof.db"
    r = subprocess.run([PY, "-m", "sonde", "-o", db, PROGRAMS / program, str(free_port())],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=clean_env(PYTHONPATH=PYTHONPATH, OMP_NUM_THREADS=1, **env))
    assert r.returncode == 0, r.stderr
    return db, sorted(line for line in r.stdout.splitlines() if line)


def candidates(db, rule=None):
    """sonde candidates' JSON rows for `db` (of one rule, if given)."""
    c = subprocess.run([CLI, "candidates", db, "--format", "json"], capture_output=True,
                       text=True)
    assert c.returncode == 0, c.stderr
    return [x for x in json.loads(c.stdout)["candidates"] if rule is None or x["rule"] == rule]


@pytest.fixture(scope="module")
def ddp(tmp_path_factory):
    # Two ranks as torchrun starts them (its environment variables), each under python3 -m
    # sonde: Debian's torchrun 1.13 fails on Python 3.11 before it starts any worker.
    tmp = tmp_path_factory.mktemp("ddp")
    db = tmp / "prof.db"
    port = free_port()
    procs = [subprocess.Popen(
        [PY, "-m", "sonde", "-o", db, DDP], cwd=tmp, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        env=clean_env(PYTHONPATH=PYTHONPATH, RANK=r, LOCAL_RANK=r, WORLD_SIZE=2,
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=port, TORCHELASTIC_RUN_ID="ddp-e2e",
                      OMP_NUM_THREADS=1)) for r in (0, 1)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    ranks = [tmp / f"prof.rank{i}.db" for i in (0, 1)]
    assert all(f.exists() for f in ranks), list(tmp.iterdir())
    merged = tmp / "run.db"
    m = subprocess.run([CLI, "merge", "-o", merged, *ranks], capture_output=True, text=True)
    assert m.returncode == 0, m.stderr
    return {"outs": outs, "ranks": ranks, "merged": merged}


PARAMS = 64 * 32 + 32 + 32 * 10 + 10  # torch_ddp.py's model: one bucket


def test_ddp_allreduce_bytes_per_step(ddp):
    for f in ddp["ranks"]:
        rows = query(f, "SELECT c.kind, c.blocking, c.comm_size, c.bytes, SUM(c.calls) FROM "
                        "comm_ops c JOIN nodes n USING (node_id) JOIN nodes p ON p.node_id = "
                        "n.parent_id JOIN routines r ON r.routine_id = p.routine_id WHERE c.op "
                        "= 'c10d::allreduce_' AND r.name LIKE '%AccumulateGrad' GROUP BY 1, 2, "
                        "3, 4")
        assert rows == [("collective", 0, 2, PARAMS * 4, 5)], rows


def test_back_to_back_allreduces_keep_their_bytes(ddp):
    for f in ddp["ranks"]:
        rows = query(f, "SELECT c.bytes, SUM(c.calls) FROM comm_ops c JOIN nodes n USING "
                        "(node_id) JOIN nodes p ON p.node_id = n.parent_id JOIN routines r ON "
                        "r.routine_id = p.routine_id WHERE c.op = 'c10d::allreduce_' AND r.name "
                        "LIKE '%(all_reduce)' GROUP BY 1")
        assert rows == [(1000, 40)], rows


def test_ddp_comm_time_and_setup(ddp):
    f = ddp["merged"]
    comm = query(f, "SELECT rank, comm_s, setup_s FROM rank_comm ORDER BY rank")
    assert len(comm) == 2 and all(c > 0 and s > 0 for _, c, s in comm), comm
    # Rank 0 waited about 1 s for rank 1 in the rendezvous: a set-up call, nothing beneath it.
    setup = query(f, "SELECT op, kind FROM comm_ops WHERE kind = 'setup'")
    assert set(setup) == {("c10d::init_process_group", "setup")}, setup


def test_ddp_rendezvous_is_no_imbalance(ddp):
    # Rank 0 waits about 1 s in init_process_group for rank 1: without the set-up call, that
    # wait's frames were the top rank-imbalance candidate.
    r = subprocess.run([CLI, "candidates", ddp["merged"], "--format", "json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for name in ("init_process_group", "setup_call", "rendezvous", "TCPStore",
                 "_store_based_barrier", "<import>"):
        assert name not in text, text


def test_ddp_rank_rule_names_the_computation_not_who_waited(ddp):
    # Rank 1 computes 5 times rank 0's work in "imbalanced"; rank 0 then waits for it in the
    # region "waiting", inside torch.distributed's broadcast (whose c10d operator only posts the
    # collective: Python's frame holds the wait). Before, that frame and the region were
    # candidates naming rank 0, the one that waited, as the slow rank.
    r = subprocess.run([CLI, "candidates", ddp["merged"], "--format", "json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    found = {c["location"]: c for c in json.loads(r.stdout)["candidates"]
             if c["rule"] == "rank-imbalance"}
    # The region, or the work beneath it that holds nearly all its lost time (the rule keeps
    # the deepest of such a chain, and which it is varies with the load; a region whose lost
    # time its matmul and tanh hold together is their caller): rank 1's.
    assert found and all(c["evidence"]["slowest_rank"] == 1 for c in found.values()), found
    work = [w for w in ("imbalanced [region]", "aten::matmul [torch]", "sgemm_ [blas]")
            if w in found]
    assert work, found
    assert work[0] == "imbalanced [region]" or \
        "imbalanced" in found[work[0]]["evidence"].get("same_imbalance_in", ""), found[work[0]]
    assert not any("waiting" in where or "broadcast" in where or "all_reduce" in where
                   for where in found), found
    # The imbalance table itself keeps every routine, the waits among them.
    table = query(ddp["merged"], "SELECT routine FROM rank_imbalance")
    assert any(name.endswith("(broadcast)") for (name,) in table), table
    comm = dict(query(ddp["merged"], "SELECT r.name, c.is_comm FROM routine_comm c JOIN "
                                     "routines r USING (routine_id) WHERE r.name IN "
                                     "('waiting', 'imbalanced') OR r.name LIKE '%(broadcast)'"))
    assert comm["waiting"] == 0 and comm["imbalanced"] == 0, comm
    assert all(v == 1 for k, v in comm.items() if k.endswith("(broadcast)")), comm


def test_ddp_breakdown_counts_comm(ddp):
    r = subprocess.run([CLI, "metrics", ddp["ranks"][0], "--section", "breakdown", "--format",
                        "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout)["breakdown"]
    comm = next(p for p in b["phases"] if p["phase"] == "t_comm")
    assert b["iterations"] == 5 and comm["time_s"] > 0, comm
    # Its routines, longest first (the table names three): the all-reduces' operator, or the
    # Python frame that waited for them, beside the last steps' broadcasts and the reducer's
    # wait in backward, in an order the load decides (a CI run had the all-reduce fourth).
    # So t_comm is held to holding the all-reduces' own time, whichever is named.
    (allreduce_s,) = query(ddp["ranks"][0], "SELECT SUM(time_ns) / 1e9 FROM comm_ops "
                                            "WHERE op = 'c10d::allreduce_'")[0]
    assert allreduce_s and comm["time_s"] >= 0.99 * allreduce_s, (comm, allreduce_s)
    assert any(w in comm["routines"] for w in ("c10d::", "(all_reduce)", "(broadcast)",
                                               "(backward)")), comm


def test_ddp_merged_breakdown_says_each_ranks_iterations(ddp):
    # The merged file's training threads are both ranks': 5 lockstep steps each read "10
    # iterations" (a red-team run: 120 for 60). Per rank now, and the sum, as the text says.
    r = subprocess.run([CLI, "metrics", ddp["merged"], "--section", "breakdown", "--format",
                        "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    b = json.loads(r.stdout)["breakdown"]
    assert b["rank_iterations"] == [{"rank": 0, "iterations": 5}, {"rank": 1, "iterations": 5}]
    assert b["iterations"] == 10 and b["threads"] == 2, b
    text = subprocess.run([CLI, "metrics", ddp["merged"], "--section", "breakdown"],
                          capture_output=True, text=True).stdout
    assert "(5 iterations on each of 2 ranks, 10 in all; ms/iter per rank's iteration" in text
    one = subprocess.run([CLI, "metrics", ddp["ranks"][0], "--section", "breakdown", "--format",
                          "json"], capture_output=True, text=True)
    assert json.loads(one.stdout)["breakdown"]["rank_iterations"] == []


def test_scaling_compares_the_training_loops(tmp_path):
    # sonde scaling's whole-run figure holds imports, the rendezvous and teardown: a red-team
    # 2-rank DDP run read 19.7 % efficiency where its loops scaled 35 %. The loop table holds
    # each run's slowest rank's time in its iterations, against the program's own loop timer.
    def ranks(n, name):
        port = free_port()
        procs = [subprocess.Popen(
            [PY, "-m", "sonde", "-o", tmp_path / f"{name}.db", PROGRAMS / "torch_scaling.py"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=clean_env(PYTHONPATH=PYTHONPATH, RANK=r, LOCAL_RANK=r, WORLD_SIZE=n,
                          MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS=1))
            for r in range(n)]
        outs = [p.communicate(timeout=300) for p in procs]
        assert [p.returncode for p in procs] == [0] * n, outs
        timed = max(float(o.split()[-1]) for o, _ in outs)
        files = [tmp_path / f"{name}.rank{r}.db" for r in range(n)]
        merged = tmp_path / f"{name}.merged.db"
        m = subprocess.run([CLI, "merge", "-o", merged, *files], capture_output=True, text=True)
        assert m.returncode == 0, m.stderr
        return merged, timed

    one, one_s = ranks(1, "one")
    two, two_s = ranks(2, "two")
    r = subprocess.run([CLI, "scaling", one, two, "--format", "json"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    loop = json.loads(r.stdout)["loop"]
    assert [row["iterations"] for row in loop] == [30, 30], loop
    for row, timed in zip(loop, (one_s, two_s)):
        assert row["loop_s"] == pytest.approx(timed, rel=0.1, abs=0.01), (row, timed)
    assert loop[1]["efficiency_pct"] == pytest.approx(100 * one_s / (2 * two_s), rel=0.15), loop
    text = subprocess.run([CLI, "scaling", one, two], capture_output=True, text=True).stdout
    assert "Training loop (time: the slowest rank's iterations" in text, text


def test_spawned_ranks_share_one_file(tmp_path):
    # torch.multiprocessing.spawn gives each rank its number in init_process_group's arguments,
    # not the environment: before, the one file read as a single rank (with the parent's and
    # its resource tracker's time), and `sonde ranks` said "1 rank" with comm size 2.
    db, lines = spawned(tmp_path, "torch_spawn.py")
    assert lines == ["done", "rank 0 sum 256000", "rank 1 sum 256000"], lines
    ranked = query(db, "SELECT rank, world_size FROM processes WHERE rank IS NOT NULL "
                       "ORDER BY rank")
    assert ranked == [(0, 2), (1, 2)], ranked
    # Each rank is its worker process alone; the parent and the tracker are no rank's.
    per_rank = query(db, "SELECT rank, processes FROM rank_times ORDER BY rank")
    assert per_rank == [(0, 1), (1, 1)], per_rank
    sizes = query(db, "SELECT DISTINCT comm_size FROM comm_ops WHERE op = 'c10d::allreduce_'")
    assert sizes == [(2,)], sizes
    said = query(db, "SELECT severity, message FROM notes WHERE topic = 'rank' ORDER BY 2")
    assert said[0][1].startswith("torch.distributed says rank 0 of 2"), said
    # How torch.multiprocessing.spawn's ranks are recorded, as documented: it said "warning"
    # in every report of such a run.
    assert {severity for severity, _ in said} == {"info"}, said
    report = subprocess.run([CLI, "report", db], capture_output=True, text=True, timeout=60)
    assert report.returncode == 0 and "warning:" not in report.stdout, report.stdout
    # One rank of the shared file leaves out the process that began the run and wrote to it:
    # `--rank 1` said its first process had written nothing.
    for rank in ("0", "1"):
        report = subprocess.run([CLI, "report", db, "--rank", rank], capture_output=True,
                                text=True, timeout=60)
        assert report.returncode == 0 and "wrote nothing" not in report.stdout, report.stdout
    where = [x["location"] for x in candidates(db)]
    assert not any("resource_tracker" in w or "spawn" in w for w in where), where


def test_work_without_a_c10d_call_takes_no_other_calls_bytes(tmp_path):
    # torch 1.13's all_to_all_single and all_reduce_coalesced post gloo work events with no c10d
    # operator before them. Before, such an event held every later one back: each all-reduce
    # after it got 0 bytes (a red-team DDP run: 19 of 19), or the next all-reduce took the
    # coalesced one's 120 bytes and every later one its predecessor's.
    db, lines = spawned(tmp_path, "torch_orphan_events.py")
    assert lines == ["rank 0 32000 8000", "rank 1 32000 8000"], lines
    rows = query(db, "SELECT pr.rank, c.bytes, SUM(c.calls) FROM comm_ops c JOIN nodes n "
                     "USING (node_id) JOIN threads t USING (thread_id) JOIN process_ranks pr "
                     "USING (process_id) WHERE c.op = 'c10d::allreduce_' "
                     "GROUP BY pr.rank, c.bytes ORDER BY pr.rank, c.bytes")
    assert rows == [(0, 1000, 5), (0, 4000, 5), (1, 1000, 5), (1, 4000, 5)], rows
    said = [n for (n,) in query(db, "SELECT message FROM notes WHERE topic = 'torch'")]
    assert len(said) == 2 and all(
        n.startswith("10 process-group work events had no torch.distributed call")
        and "gloo:all_to_all x 5" in n and "gloo:all_reduce x 5" in n for n in said), said


def test_many_calls_in_flight_and_a_threads_last_call_keep_their_bytes(tmp_path):
    """150 all-reduces posted at once, then waited on (one per parameter, as hand-written data
    parallelism does): past 64 waiting for their gloo work, the oldest were recorded without
    bytes and each later one took its predecessor's (a red-team run: 30 % of the bytes lost at
    200, the ranks unequal). A side thread's last all-reduce, paired at no later operator of its
    own, was in no comm op. Both read "no torch.distributed call to pair with"."""
    db, lines = spawned(tmp_path, "torch_many_in_flight.py")
    expected = 150 * 100 * 4 + 4 * sum(range(150)) + 3 * 10000
    assert lines == [f"rank 0 153 {expected}", f"rank 1 153 {expected}"], lines
    rows = query(db, "SELECT pr.rank, SUM(c.calls), SUM(c.calls * c.bytes), "
                     "SUM(CASE WHEN c.bytes = 0 THEN c.calls ELSE 0 END) FROM comm_ops c "
                     "JOIN nodes n USING (node_id) JOIN threads t USING (thread_id) "
                     "JOIN process_ranks pr USING (process_id) WHERE c.op = 'c10d::allreduce_' "
                     "GROUP BY pr.rank ORDER BY pr.rank")
    assert rows == [(0, 153, expected, 0), (1, 153, expected, 0)], rows
    said = query(db, "SELECT message FROM notes WHERE topic = 'torch' AND message LIKE "
                     "'%torch.distributed call%'")
    assert said == [], said


def test_a_ranks_longer_import_is_set_up_not_imbalance(tmp_path):
    # Each spawned rank imports the main module again before its worker runs; one rank's import
    # takes 0.4 s longer (slow_second_import.py), as under load. Its <module> was the top
    # rank-imbalance candidate ("rank 1 spends ... in torch_spawn_import.py:1(<module>)"; the
    # spawn test failed so 1 run in a few under a parallel ctest).
    db, _ = spawned(tmp_path, "torch_spawn_import.py",
                    SLOW_IMPORT_MARKER=str(tmp_path / "marker"))
    assert (tmp_path / "marker").exists()
    lost = query(db, "SELECT MAX(lost_s) FROM rank_imbalance WHERE routine LIKE "
                     "'torch_spawn_import.py:%(<module>)'")[0][0]
    assert lost is not None and lost > 0.15, lost  # the measurement keeps it
    found = [x["location"] for x in candidates(db, "rank-imbalance")]
    assert not found, found


def test_rank_rule_judges_a_routine_outside_the_waits_in_it(tmp_path):
    # work() holds init_process_group, the steps' computation and their all-reduces: rank 1
    # computes more, rank 0 waits for it in the rendezvous (rank 1's prep()) and in each
    # all-reduce, so rank 0's inclusive time in work() is the longer. The rule named work() with
    # rank 0 as the slow one (a red-team case); each rank's time outside the waits names rank 1.
    db, _ = spawned(tmp_path, "torch_late_rank.py")
    (slowest,), = query(db, "SELECT slowest_rank FROM rank_imbalance "
                            "WHERE routine LIKE 'torch_late_rank.py:%(work)'")
    assert slowest == 0  # the measurement: inclusive, the waits in it
    found = {x["location"]: x["evidence"]["slowest_rank"]
             for x in candidates(db, "rank-imbalance")}
    # Rank 1's own work (its spin, beneath prep() and compute(); run() above both, where the
    # two add up), never work() for rank 0.
    assert found and set(found.values()) == {1}, found
    assert any("(prep)" in w or "(spin)" in w or "(compute)" in w for w in found), found
    assert not any("(work)" in w for w in found), found


def test_the_programs_own_work_wait_is_communication(tmp_path):
    # sync() posts an async all-reduce and waits on it with work.wait(): rank 0, computing a
    # quarter of rank 1's work, waits there. The wait was sync()'s own time, and sync() rank 0's
    # imbalance (a red-team find); it is a `wait` comm op of its own, as MPI_Wait is.
    db, out = spawned(tmp_path, "torch_async_wait.py")
    assert out == ["rank 0 3.0 6.0", "rank 1 3.0 6.0"], out  # results unchanged
    waits = query(db, "SELECT COUNT(DISTINCT n.thread_id), SUM(co.calls), MIN(co.blocking), "
                      "SUM(co.time_ns) FROM comm_ops co JOIN nodes n USING (node_id) "
                      "JOIN routines r USING (routine_id) WHERE r.name = 'c10d::Work::wait' "
                      "AND co.kind = 'wait'")[0]
    assert waits[:3] == (2, 30, 1), waits
    # Its parent is sync(): torch.distributed's blocking all_reduce waits in its own frame,
    # which is communication already, so no wait frame is beneath one of its frames.
    parents = query(db, "SELECT DISTINCT pr.name FROM nodes n JOIN routines r USING (routine_id) "
                        "JOIN nodes p ON p.node_id = n.parent_id JOIN routines pr "
                        "ON pr.routine_id = p.routine_id WHERE r.name = 'c10d::Work::wait'")
    assert [name for (name,) in parents] and all(name.endswith("(sync)")
                                                 for (name,) in parents), parents
    # Rank 0 waited about rank 1's extra 60 ms a step (15 steps) there; rank 1 less (under a
    # loaded ctest a rank's CPU share varies, and rank 1 waited 0.47 s against rank 0's 0.57).
    per_rank = dict(query(db, "SELECT pr.rank, SUM(co.time_ns) / 1e9 FROM comm_ops co "
                              "JOIN nodes n USING (node_id) JOIN routines r USING (routine_id) "
                              "JOIN threads t ON t.thread_id = n.thread_id JOIN process_ranks pr "
                              "ON pr.process_id = t.process_id WHERE r.name = 'c10d::Work::wait' "
                              "GROUP BY pr.rank"))
    assert per_rank[0] > 0.25 and per_rank[0] > per_rank[1], per_rank
    found = {x["location"]: x["evidence"]["slowest_rank"]
             for x in candidates(db, "rank-imbalance")}
    assert found and set(found.values()) == {1}, found
    assert not any("(sync)" in w for w in found), found
    # comm-exposed, where it fires, names the program's own waits and leaves their imbalance
    # part (rank-imbalance's) out of its gain: it was told to "start nonblocking collectives",
    # which it does, with a gain counting rank 0's wait for rank 1 a second time.
    for c in candidates(db, "comm-exposed"):
        ev = c["evidence"]
        assert "the program's own work.wait()" in c["advice"], c
        imbalance = ev["work_wait_s_per_rank"] - ev["work_wait_least_rank_s"]
        assert c["est_gain_s"] == pytest.approx(0.5 * (ev["exposed_s_per_rank"] - imbalance),
                                                abs=1e-6), c
    # The method stays a method: its name and doc are Work.wait's. A Python subclass of Work (a
    # backend's own) that does not override wait reaches C++'s Work::wait through pybind11's
    # trampoline, which took the wrapper for a Python override and called it again, until
    # RecursionError; one that overrides it keeps its own.
    program = tmp_path / "subclass.py"
    program.write_text(textwrap.dedent("""\
        import datetime
        import torch.distributed as dist
        Work = dist.distributed_c10d.Work
        print(Work.wait.__name__, Work.wait.__doc__ is not None)
        class Done(Work):
            def is_completed(self):
                return True
        class Own(Work):
            def wait(self, timeout=None):
                return "its own"
        print(Own().wait())
        try:
            Done().wait(datetime.timedelta(milliseconds=20))
        except RuntimeError as e:
            print("RuntimeError", e)
        """))
    plain = subprocess.run([PY, program], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, env=clean_env())
    r = subprocess.run([PY, "-m", "sonde", "-o", tmp_path / "sub.db", program],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=clean_env(PYTHONPATH=PYTHONPATH))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == plain.stdout.splitlines() == [
        "wait True", "its own", "RuntimeError Operation timed out!"], (r.stdout, plain.stdout)


def test_an_operation_in_flight_ends_when_its_work_completes(tmp_path):
    # An async all-reduce posted before a matrix product was in flight until the thread's next
    # operator or wait, after the product: a red-team rank read 1.03 s in flight and overlapped
    # where its future's callback stamped 0.15 s. It ends when its work's event ends.
    db, out = spawned(tmp_path, "torch_async_overlap.py")
    truth = {int(line.split()[1]): float(line.split()[-1]) for line in out}
    assert [line.split()[2] for line in out] == ["3.0", "3.0"], out  # results unchanged
    products = dict(query(db, "SELECT pr.rank, SUM(n.incl_ns) / 1e9 FROM nodes n JOIN routines r "
                              "USING (routine_id) JOIN threads t ON t.thread_id = n.thread_id "
                              "JOIN process_ranks pr ON pr.process_id = t.process_id "
                              "WHERE r.name = 'aten::matmul' GROUP BY pr.rank"))
    inflight = dict(query(db, "SELECT pr.rank, SUM(o.inflight_ns) / 1e9 FROM comm_overlap o "
                              "JOIN threads t USING (thread_id) JOIN process_ranks pr "
                              "USING (process_id) GROUP BY pr.rank"))
    # The callback's stamp waits for the GIL behind the product now and then: the truth is at
    # most that late, and sonde's no later than it (it read the products' time before).
    for rank in (0, 1):
        assert 0 < inflight[rank] <= 1.25 * truth[rank] + 0.03, (rank, inflight, truth, products)


def test_a_blocking_collectives_work_ends_when_its_wait_returns(tmp_path):
    # A blocking all-reduce or barrier (and one posted and waited on at once) was in flight until
    # the thread's next operator: a step's plain Python work after it read as overlapped, 94 %
    # of a red team's ranks' communication where nothing could overlap.
    db, out = spawned(tmp_path, "torch_blocking_compute.py")
    assert [line.split()[2] for line in out] == ["4096.0", "4096.0"], out  # results unchanged
    computed = max(float(line.split()[-1]) for line in out)
    rows = query(db, "SELECT rank, overlapped_s, inflight_s FROM rank_overlap ORDER BY rank")
    assert [r[0] for r in rows] == [0, 1], rows
    for rank, overlapped, inflight in rows:
        # In flight only while the collectives ran (each well under the step's compute).
        assert overlapped < 0.05 * computed, rows
        assert inflight < 0.5 * computed, rows


SHAPES = PROGRAMS / "torch_op_shapes.py"


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("shapes")
    counts = tmp / "counts.json"
    ref = subprocess.run([PY, SHAPES, "--profiler", counts], capture_output=True, text=True,
                         env=clean_env())
    assert ref.returncode == 0, ref.stderr
    db = tmp / "prof.db"
    r = sonde_py(["--record-shapes", SHAPES], db, tmp)
    assert r.returncode == 0, r.stderr
    return {"run": r, "ref": ref, "db": db, "profiler": json.loads(counts.read_text())}


def test_record_shapes_counts_match_torch_profiler(shapes):
    assert shapes["run"].stdout == shapes["ref"].stdout
    rows = query(shapes["db"], "SELECT operator, input_shapes, SUM(calls) FROM operator_shapes "
                               "GROUP BY operator, input_shapes")
    sonde = {f"{op}|{s}": n for op, s, n in rows}
    prof = shapes["profiler"]
    # The operators the model's modules call from Python, which no other operator calls: per
    # input signature, sonde's count is torch.profiler's record_shapes count.
    exact = {k for k in prof if k.split("|")[0] in
             ("aten::conv2d", "aten::relu", "aten::max_pool2d", "aten::linear")}
    assert {k: sonde.get(k) for k in exact} == {k: prof[k] for k in exact}
    # Two batch sizes: two signatures of conv2d, 3 calls at 16 and 1 at 5.
    conv = {k: v for k, v in sonde.items() if k.startswith("aten::conv2d|")}
    assert conv == {"aten::conv2d|[[16, 1, 28, 28], [4, 1, 3, 3], [4], [], [], [], []]": 3,
                    "aten::conv2d|[[5, 1, 28, 28], [4, 1, 3, 3], [4], [], [], [], []]": 1}
    # Per signature the calls add up to the operator's node counts, and the time stays within
    # the node's inclusive time.
    per_node = query(shapes["db"], "SELECT o.node_id, SUM(o.calls), SUM(o.time_ns), n.calls, "
                                   "n.incl_ns FROM op_shapes o JOIN nodes n USING (node_id) "
                                   "GROUP BY o.node_id")
    assert per_node
    for node, calls, time_ns, node_calls, incl_ns in per_node:
        assert calls == node_calls, node
        assert 0 < time_ns <= incl_ns, node


def test_record_shapes_dtypes_and_callers(shapes):
    rows = query(shapes["db"], "SELECT input_dtypes, caller FROM operator_shapes "
                               "WHERE operator = 'aten::conv2d'")
    assert {d for d, _ in rows} == {"float, float, float, GenericList, GenericList, "
                                    "GenericList, Int"}
    assert {c.split(":")[0] + c[c.index("("):] for _, c in rows} == {"conv.py(_conv_forward)"}
    # Ranges without inputs (autograd's evaluate_function, FUNCTION events too) have none.
    assert query(shapes["db"], "SELECT COUNT(*) FROM op_shapes WHERE input_shapes = '[]'") == \
        [(0,)]
    out = subprocess.run([CLI, "shapes", "--operators", str(shapes["db"]), "--format", "csv"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == ("operator,input_shapes,input_dtypes,calls,time_s,"
                                          "mean_us,gflop,gflops,caller")
    assert '"[[5, 1, 28, 28], [4, 1, 3, 3], [4], [], [], [], []]"' in out.stdout
    text = subprocess.run([CLI, "shapes", str(shapes["db"])], capture_output=True, text=True)
    assert "operator input signatures recorded: sonde shapes --operators" in text.stdout


def test_gemm_operators_flops_from_their_shapes_are_torch_profilers(shapes):
    """FLOPs of the GEMM operators from their recorded shapes (`sonde shapes --operators`'
    gflop) against torch.profiler's with_flops on the same seeded run: the top-level
    aten::linear's are the aten::addmm's beneath it (each linear here has a bias), aten::mm's
    (the backward's) its own; a convolution's are not counted (stride and padding are not
    recorded)."""
    out = subprocess.run([CLI, "shapes", "--operators", str(shapes["db"]), "--format", "json"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    gflop = {}
    for row in json.loads(out.stdout)["rows"]:
        if row["gflop"] is not None:
            gflop[row["operator"]] = gflop.get(row["operator"], 0) + row["gflop"]
    prof = shapes["profiler"]
    assert prof["flops|aten::addmm"] > 0 and prof["flops|aten::mm"] > 0, prof
    assert set(gflop) == {"aten::linear", "aten::mm"}, gflop
    assert gflop["aten::linear"] * 1e9 == pytest.approx(prof["flops|aten::addmm"], rel=1e-9)
    assert gflop["aten::mm"] * 1e9 == pytest.approx(prof["flops|aten::mm"], rel=1e-9)


def test_no_shapes_by_default(train):
    assert query(train["db"], "SELECT COUNT(*) FROM op_shapes") == [(0,)]


@pytest.mark.parametrize("python", [True, False], ids=["python", "native-only"])
def test_sonde_run_python_records_every_rank_a_launcher_starts(tmp_path, python):
    """`sonde run --python -- LAUNCHER`, as a user runs torchrun under sonde: the launcher (a
    shell here, as Debian's torchrun 1.13 cannot start workers) starts both ranks with
    torchrun's variables, and every interpreter of the run has the Python hook: each rank's
    file holds DDP's all-reduces. Without --python the ranks record native calls only, and
    each file says so in a python-hook note instead of showing t_comm 0 silently."""
    port = free_port()
    script = (f"export MASTER_ADDR=127.0.0.1 MASTER_PORT={port} WORLD_SIZE=2 "
              "TORCHELASTIC_RUN_ID=ddp-run OMP_NUM_THREADS=1\n"
              f"RANK=0 LOCAL_RANK=0 {PY} {DDP} & RANK=1 LOCAL_RANK=1 {PY} {DDP}; wait\n")
    (tmp_path / "launch.sh").write_text(script)
    flags = ["--python"] if python else []
    r = subprocess.run([CLI, "run", *flags, "-o", tmp_path / "prof.db", "--", "sh", "launch.sh"],
                       cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    ranks = [tmp_path / f"prof.rank{i}.db" for i in (0, 1)]
    for f in ranks:
        allreduces = query(f, "SELECT COALESCE(SUM(calls), 0) FROM comm_ops WHERE op = "
                              "'c10d::allreduce_' AND bytes = ?", (PARAMS * 4,))[0][0]
        hooked = query(f, "SELECT value FROM run_info WHERE key = 'python.hook'")
        said = query(f, "SELECT COUNT(*) FROM notes WHERE topic = 'python-hook'")[0][0]
        if python:
            assert allreduces == 5 and hooked == [("eval_frame",)] and said == 0, f
        else:
            assert allreduces == 0 and hooked == [] and said == 1, f
            # What the note and sonde ranks read: torch ran in this hook-less process.
            assert query(f, "SELECT value FROM run_info WHERE key = 'python.torch_loaded'") == \
                [("1",)], f
        # sonde ranks too says why no collective is there (it showed comm 0 s, 0 bytes alone).
        ranks = subprocess.run([CLI, "ranks", f], capture_output=True, text=True, timeout=60)
        assert ranks.returncode == 0, ranks.stderr
        assert ("note: 1 of the ranks' processes ran Python without sonde's Python hook" in
                ranks.stdout) != python, ranks.stdout


@pytest.mark.parametrize("launch", ["--in-process", "--re-exec"])
def test_python_m_sonde_around_torchrun_names_the_rank_files(tmp_path, launch):
    """`python3 -m sonde -m torch.distributed.run ...` (Debian's torchrun 1.13 starts workers
    with --redirects and --tee): the ranks write prof.rank<R>.db, and the launcher's own file
    says so as `sonde run` says it. In-process, no sonde run outlives the program: until
    2026-12-06 the launcher's file had no note, read as a second rank 0 (`sonde merge prof*.db`
    refused it, "both hold rank 0"), and every rank file, whose first process is torchrun's
    child, warned that the run's first process had written nothing."""
    r = subprocess.run(
        [PY, "-m", "sonde", launch, "-o", "prof.db", "-m", "torch.distributed.run",
         "--nproc_per_node", "2", "--master_port", str(free_port()), "--redirects", "1",
         "--tee", "1", DDP], cwd=tmp_path, env=clean_env(PYTHONPATH=PYTHONPATH, OMP_NUM_THREADS=1),
        capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if line.startswith("sonde:")]
    assert said[-2:] == [
        "sonde: profile written to prof.db",
        "sonde: 2 ranks wrote their own files, prof.rank0.db, prof.rank1.db; to read them as one: "
        "sonde merge -o prof.merged.db prof.rank*.db"], r.stderr
    notes = query(tmp_path / "prof.db", "SELECT topic FROM notes WHERE topic = 'rank-files'")
    assert notes == [("rank-files",)]
    for i in (0, 1):
        f = tmp_path / f"prof.rank{i}.db"
        assert query(f, "SELECT COALESCE(SUM(calls), 0) FROM comm_ops WHERE op = "
                        "'c10d::allreduce_' AND bytes = ?", (PARAMS * 4,)) == [(5,)]
        report = subprocess.run([CLI, "report", f], capture_output=True, text=True, timeout=60)
        assert report.returncode == 0 and "warning:" not in report.stdout, report.stdout
    m = subprocess.run(f"{CLI} merge -o all.db prof*.db", shell=True, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert m.returncode == 0 and "prof.db left out: the launcher's own profile" in m.stderr, m
    report = subprocess.run([CLI, "report", "all.db"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert report.returncode == 0 and "warning:" not in report.stdout, report.stdout


def test_a_window_around_torchrun_is_each_ranks(tmp_path):
    """`--steps N` around torchrun: the ranks open their windows; the launcher runs no step. Its
    "the collection window never opened ... nothing was measured" came first on stderr, read as
    an empty run where both ranks had measured their steps (a red-team find). Where the ranks'
    windows never open (a mistyped region), the launcher says so for them."""
    def torchrun(region, out):
        return subprocess.run(
            [PY, "-m", "sonde", "--steps", "2", "--step-region", region, "-o", out, "-m",
             "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
             "--redirects", "1", "--tee", "1", DDP], cwd=tmp_path,
            env=clean_env(PYTHONPATH=PYTHONPATH, OMP_NUM_THREADS=1), capture_output=True,
            text=True, timeout=300)
    typo = torchrun("imbalance", "typo.db")
    assert typo.returncode == 0, typo.stderr
    assert "sonde: in 2 of the 2 ranks' files, the collection window never opened: region " \
        "'imbalance' began 0 times" in typo.stderr, typo.stderr
    r = torchrun("imbalanced", "prof.db")
    assert r.returncode == 0, r.stderr
    assert "never opened" not in r.stderr and "nothing was measured" not in r.stderr, r.stderr
    (note,), = query(tmp_path / "prof.db", "SELECT message FROM notes WHERE topic = 'window'")
    assert note.startswith("this process launched ranks and opened no collection window"), note
    for i in (0, 1):  # the 3 steps after the 2 skipped, each rank
        assert query(tmp_path / f"prof.rank{i}.db", "SELECT SUM(n.calls) FROM nodes n JOIN "
                     "routines r USING (routine_id) WHERE r.name = 'imbalanced'") == [(3,)]


RESTARTED = """import os, sys, time
import torch.distributed as dist
dist.init_process_group("gloo")
if dist.get_rank() == 1 and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    sys.exit(3)  # the first attempt's rank 1 fails: torchrun restarts the group
dist.barrier()
print("done", dist.get_rank(), os.environ["TORCHELASTIC_RESTART_COUNT"], flush=True)
"""


def test_a_restarted_torchrun_job_names_its_last_attempts_files(tmp_path):
    """torchrun --max_restarts: each attempt's ranks write their files, one run id for all. The
    closing line said "4 ranks" for 2 ranks x 2 attempts and suggested a merge that refused
    them, "both hold rank 0" (a red-team find). It now names the last attempt's files and the
    merge of them; a merge of both attempts says what they are."""
    (tmp_path / "restarted.py").write_text(RESTARTED)
    r = subprocess.run(
        [PY, "-m", "sonde", "-o", "prof.db", "-m", "torch.distributed.run", "--nproc_per_node",
         "2", "--max_restarts", "1", "--master_port", str(free_port()), "--redirects", "1",
         "--tee", "1", "restarted.py"],
        cwd=tmp_path, env=clean_env(PYTHONPATH=PYTHONPATH, OMP_NUM_THREADS=1),
        capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert sorted(line.split(":", 1)[-1] for line in r.stdout.splitlines() if "done" in line) \
        == ["done 0 1", "done 1 1"], r.stdout
    attempt = {f.name: query(f, "SELECT value FROM run_info WHERE key = 'torch.restart_count'")
               for f in tmp_path.glob("prof.rank*.db")}
    last = sorted(n for n, a in attempt.items() if a == [("1",)])
    assert len(attempt) == 4 and len(last) == 2, attempt
    said = [line for line in r.stderr.splitlines() if line.startswith("sonde:")][-1]
    assert said == (
        f"sonde: 2 ranks wrote their own files in each of 2 attempts (torchrun restarted them; "
        f"4 files in all); the last attempt's, {last[0]}, {last[1]}; to read that attempt as "
        f"one: sonde merge -o prof.merged.db {last[0]} {last[1]}"), said
    m = subprocess.run([CLI, "merge", "-o", "prof.merged.db", *last], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert m.returncode == 0, m.stderr
    m = subprocess.run(f"{CLI} merge -o all.db prof.rank*.db", shell=True, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert m.returncode == 1 and "of attempts" in m.stderr and "--max_restarts" in m.stderr, m


def test_torchrun_on_two_srun_nodes_writes_a_file_per_global_rank(tmp_path):
    """`srun -N 2 python3 -m sonde -o prof.db -m torch.distributed.run --nnodes 2 ...`, each
    node's task given SLURM's variables by hand: SLURM_PROCID, which torchrun's workers
    inherit, was read before their RANK, so each node's agent and workers shared
    prof.rank<node>.db (a red-team find). Now each worker writes its global rank's file with
    DDP's all-reduces, each agent prof.launcher<node>.db, and each node names the four."""
    port = free_port()
    agents = [subprocess.Popen(
        [PY, "-m", "sonde", "-o", "prof.db", "-m", "torch.distributed.run", "--nnodes", "2",
         "--node_rank", str(node), "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
         "--master_port", str(port), "--redirects", "1", "--tee", "1",
         "--log_dir", f"logs{node}", DDP], cwd=tmp_path,
        env=clean_env(PYTHONPATH=PYTHONPATH, OMP_NUM_THREADS=1, SLURM_JOB_ID=77,
                      SLURM_STEP_ID=0, SLURM_PROCID=node, SLURM_NTASKS=2, SLURM_LOCALID=0),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for node in (0, 1)]
    for node, agent in enumerate(agents):
        _, err = agent.communicate(timeout=300)
        assert agent.returncode == 0, err
        said = [line for line in err.splitlines() if line.startswith("sonde:")]
        assert said[-2:] == [
            f"sonde: profile written to prof.launcher{node}.db",
            "sonde: 4 ranks wrote their own files, prof.rank0.db, prof.rank1.db, prof.rank2.db, "
            "prof.rank3.db; to read them as one: sonde merge -o prof.merged.db prof.rank*.db"], err
    for rank in range(4):
        f = tmp_path / f"prof.rank{rank}.db"
        assert query(f, "SELECT rank, world_size FROM processes") == [(rank, 4)]
        assert query(f, "SELECT COALESCE(SUM(calls), 0) FROM comm_ops WHERE op = "
                        "'c10d::allreduce_' AND bytes = ?", (PARAMS * 4,)) == [(5,)]
        report = subprocess.run([CLI, "report", f], capture_output=True, text=True, timeout=60)
        assert report.returncode == 0 and "warning:" not in report.stdout, report.stdout
    for node in (0, 1):
        rows = query(tmp_path / f"prof.launcher{node}.db", "SELECT rank, command FROM processes")
        assert rows and all(r is None and "torch.distributed.run" in c for r, c in rows), rows
    m = subprocess.run(f"{CLI} merge -o all.db prof*.db", shell=True, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert m.returncode == 0 and "prof.launcher1.db left out" in m.stderr, m
    assert query(tmp_path / "all.db", "SELECT rank FROM processes ORDER BY rank") == \
        [(0,), (1,), (2,), (3,)]


def test_sonde_run_python_needs_its_package(tmp_path):
    """A libsonde.so with no sonde package beside it: --python says what it looked for."""
    lib = tmp_path / "lib" / "libsonde.so"
    lib.parent.mkdir()
    lib.write_bytes(Path(os.environ["SONDE_LIB"]).read_bytes())
    r = subprocess.run([CLI, "run", "--python", "-o", tmp_path / "p.db", "--", "true"],
                       env=clean_env(SONDE_LIBRARY=lib), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode != 0 and "sonde run --python: cannot find sonde's Python package " \
        f"beside {lib}" in r.stderr, r.stderr


BMM = """
import sys, torch
import torch.autograd.profiler_util as util
# The profiler builds its event tree from microsecond timestamps and then drops an event nested
# in one of its own name: an aten::as_strided of 0 us was dropped when it tied with the one
# before it, now and then under load with or without sonde (584 of 585, one CI run). Every
# event counts here.
util.EventList._remove_dup_nodes = lambda self: None
torch.set_num_threads(1)
torch.manual_seed(0)
a, b = torch.randn(64, 16, 8), torch.randn(64, 8, 16)
def products(n):
    return [float(torch.bmm(a, b)[3, 2, 1]) for _ in range(n)]
first = products(10)
with torch.autograd.profiler.profile(use_kineto=False) as prof:
    inside = products(3)
events = {}
for e in prof.function_events:
    events[e.name] = events.get(e.name, 0) + 1
print(first[0], inside[0], products(5)[0])
print(sorted(events.items()))
"""


def test_an_operator_of_many_own_events_runs_them_unobserved(tmp_path):
    """torch 1.13's aten::bmm of 64 small products makes 9 operator events of its own for each
    (select, as_strided, ...; 1,152 a call for 128): each cost libtorch's RecordFunction and
    sonde's callbacks, and a red team's bmm read 305 us a call, 160 us alone. Once its first
    calls have shown that, it runs them with RecordFunction off; torch.profiler inside the same
    run (callbacks of its own on the thread) still sees every one of them."""
    prog = tmp_path / "bmm.py"
    prog.write_text(BMM)
    plain = subprocess.run([PY, prog], capture_output=True, text=True, env=clean_env(),
                           timeout=120)
    assert plain.returncode == 0, plain.stderr
    nested = dict(eval(plain.stdout.splitlines()[1]))
    assert nested["aten::bmm"] == 3 and sum(nested.values()) >= 3 * 33, nested
    db = tmp_path / "prof.db"
    r = sonde_py([prog], db, tmp_path)
    assert r.returncode == 0, r.stderr
    # The products, and torch.profiler's events inside the run, as without sonde.
    assert r.stdout == plain.stdout
    assert torch_counts(db).get("aten::bmm") == 18
    (note,) = query(db, "SELECT message FROM notes WHERE topic = 'torch' AND message LIKE "
                        "'%RecordFunction off%'")
    assert note[0].startswith("aten::bmm: "), note
    # The operators the program calls itself, no more: the three selects of each product's
    # indexing, none of bmm's own.
    assert torch_counts(db) == {"aten::randn": 2, "aten::bmm": 18, "aten::select": 54,
                                "aten::item": 18}
