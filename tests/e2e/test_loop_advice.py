"""sonde candidates on loops of small calls, in programs written as people write them: a masked
sequence loss picking one element at a time (python-loop, with its backward), a k-NN's per-pair
numpy distance through a helper (python-loop, numpy's advice), requests scored one row at a
time (matrix-vector), 3x3 products one point at a time (python-loop, the shape's candidate
taken out), a collate_fn padding token by token (python-loop, its loading and its operator
taken out); and the training loops of a tiny model, which are none of them."""
import os
import subprocess
import textwrap

import pytest

from conftest import clean_env, query, sonde_json

PY = "/usr/bin/python3"
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")


def profile(tmp_path, source, *args):
    program = tmp_path / "prog.py"
    program.write_text(textwrap.dedent(source))
    db = tmp_path / ("prog" + "".join("_" + a for a in args) + ".db")
    r = subprocess.run([PY, "-m", "sonde", "-o", str(db), str(program), *args],
                       env=clean_env(PYTHONPATH=PYTHONPATH, OPENBLAS_NUM_THREADS=1),
                       capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    cands = sonde_json("candidates", db, "--top", "100")["candidates"]
    return db, r.stdout, cands


def of_rule(cands, rule):
    return [c for c in cands if c["rule"] == rule]


def small_calls_under(db, function, bound_us=50):
    """The children of `function`'s nodes under `bound_us` a call (50 us, stretched on a loaded
    host as the evidence's `small_bound_us` says): the rule's small calls, by SQL."""
    bound_ns = round(bound_us * 1000)
    (calls, ns), = query(db, f"""
        SELECT SUM(c.calls), SUM(c.incl_ns) FROM nodes p JOIN routines rp USING (routine_id)
        JOIN nodes c ON c.parent_id = p.node_id JOIN routines rc ON rc.routine_id = c.routine_id
        WHERE rp.name LIKE '%({function})' AND c.calls > 0 AND c.incl_ns / c.calls <= {bound_ns}
          AND (rc.kind = 'torch' OR rc.file LIKE '%/numpy/%' OR rc.file LIKE '%/torch/%'
               OR rc.file = '<__array_function__ internals>' OR rc.kind = 'python')""")
    return calls, ns


MASKED_LOSS = """\
    import sys, torch
    import torch.nn as nn, torch.nn.functional as F
    VEC = sys.argv[1:] == ["vec"]
    torch.manual_seed(0)
    V, T, B = 30, 24, 16
    model = nn.Sequential(nn.Embedding(V, 16), nn.Linear(16, V))
    opt = torch.optim.SGD(model.parameters(), 0.1)
    def masked_loss(logits, y, lengths):
        if VEC:
            mask = torch.arange(T)[None, :] < lengths[:, None]
            return F.cross_entropy(logits[mask], y[mask], reduction="sum") / mask.sum()
        tot, cnt = 0.0, 0
        for b in range(logits.shape[0]):
            for t in range(int(lengths[b])):
                tot = tot - F.log_softmax(logits[b, t], -1)[y[b, t]]
                cnt += 1
        return tot / cnt
    s = 0.0
    for step in range(25):
        x = torch.randint(0, V, (B, T)); y = (x * 7 + 3) % V
        lengths = torch.randint(T // 2, T + 1, (B,))
        opt.zero_grad()
        loss = masked_loss(model(x), y, lengths)
        loss.backward(); opt.step(); s += loss.item()
    print(f"sum {s:.4f}")
    """


def test_a_loss_picking_one_element_at_a_time_is_a_python_loop(tmp_path):
    """A red-team sequence tagger's masked loss, 115k small operators a run, read "no rule
    fired"; vectorised it ran 20 times faster. The candidate names the loss, counts its small
    calls as the tree has them, adds the backward's autograd nodes, and the training loop above
    it (its backward and step) is no candidate; the vectorised loss makes none."""
    pytest.importorskip("torch")
    db, out, cands = profile(tmp_path, MASKED_LOSS)
    (c,) = of_rule(cands, "python-loop")
    e = c["evidence"]
    assert c["location"].endswith("(masked_loss)"), c
    assert e["small_bound_us"] >= 50, e
    calls, ns = small_calls_under(db, "masked_loss", e["small_bound_us"])
    assert e["small_calls"] == calls and e["small_s"] == pytest.approx(ns / 1e9, rel=1e-3), (e, calls)
    assert e["site_calls"] == 25 and e["most_per_site_call"] >= 32, e
    assert "aten::select x" in e["calls_of"], e
    assert e["backward_s"] > 0 and e["backward_nodes"] > 1000, e
    assert c["est_gain_s"] == pytest.approx(0.9 * (e["own_s"] + e["small_s"] + e["backward_s"]),
                                            rel=1e-3), c
    assert "--lines 'masked_loss'" in c["advice"] and "F.cross_entropy" in c["advice"], c
    # The training loop (<module>: zero_grad, backward, step each iteration) is no loop to write
    # over whole tensors.
    assert not any(x["location"].endswith("(<module>)") for x in of_rule(cands, "python-loop"))

    _, out_vec, cands_vec = profile(tmp_path, MASKED_LOSS, "vec")
    assert of_rule(cands_vec, "python-loop") == [], of_rule(cands_vec, "python-loop")
    assert float(out.split()[1]) == pytest.approx(float(out_vec.split()[1]), rel=1e-4)


def test_a_per_pair_numpy_distance_is_a_python_loop_with_numpys_advice(tmp_path):
    """A k-NN's distances, one np.sum per pair through a helper of the program's own (600k
    calls in the red team's, 3.08 s against 0.09 s vectorised): the loop calling the helper is
    the candidate, in numpy's words; the vectorised program makes none."""
    source = """\
        import sys, numpy as np
        rng = np.random.default_rng(0)
        A = rng.normal(size=(400, 16)); B = rng.normal(size=(60, 16))
        def dist(a, b):
            return np.sum((a - b) ** 2)
        def nearest():
            if sys.argv[1:] == ["vec"]:
                D = (B ** 2).sum(1)[:, None] - 2 * B @ A.T + (A ** 2).sum(1)[None, :]
                return D.argmin(1)
            out = []
            for b in B:
                out.append(int(np.argmin([dist(a, b) for a in A])))
            return np.array(out)
        print(nearest().sum())
        """
    db, out, cands = profile(tmp_path, source)
    (c,) = of_rule(cands, "python-loop")
    e = c["evidence"]
    # The per-pair list comprehension calls the helper 24,000 times: the loop is there.
    assert c["location"].endswith("(<listcomp>)") or c["location"].endswith("(nearest)"), c
    assert e["small_calls"] >= 24000 and "(dist) x" in e["calls_of"], e
    assert "np.sum(x, axis=1)" in c["advice"] and "torch" not in c["advice"], c["advice"]
    _, out_vec, cands_vec = profile(tmp_path, source, "vec")
    assert out_vec == out
    assert of_rule(cands_vec, "python-loop") == []


def test_requests_scored_one_row_at_a_time_are_a_matrix_vector_candidate(tmp_path):
    """A red-team scorer ran 6,000 sgemv on the same three matrices (one request a call);
    batched it ran 9 times faster, and sonde offered only a thread candidate. The candidate
    counts the calls the tree has, names their caller, and the batched program has none."""
    source = """\
        import sys, numpy as np
        rng = np.random.default_rng(0)
        W1 = rng.standard_normal((256, 512), dtype=np.float32) / 16
        W2 = rng.standard_normal((512, 512), dtype=np.float32) / 22
        reqs = rng.standard_normal((1500, 256), dtype=np.float32)
        def mlp(x):
            return np.maximum(x @ W1, 0) @ W2
        if sys.argv[1:] == ["batch"]:
            out = mlp(reqs)
        else:
            out = np.stack([mlp(r[None, :])[0] for r in reqs])
        print(f"{out.astype(np.float64).sum():.3f}")
        """
    db, out, cands = profile(tmp_path, source)
    (c,) = of_rule(cands, "matrix-vector")
    (calls,), = query(db, "SELECT SUM(n.calls) FROM nodes n JOIN routines r USING (routine_id) "
                          "WHERE r.name LIKE '%gemv%' AND r.kind = 'blas'")
    assert calls == 3000 and c["evidence"]["calls"] == calls, (c, calls)
    assert c["evidence"]["caller"].endswith("(mlp)"), c
    assert c["evidence"]["calls_per_caller_call"] == pytest.approx(2.0), c
    assert "X @ W" in c["advice"] and "recurrence" in c["advice"], c["advice"]
    _, out_b, cands_b = profile(tmp_path, source, "batch")
    assert abs(float(out_b) - float(out)) < 1e-2 * max(1.0, abs(float(out)))
    assert of_rule(cands_b, "matrix-vector") == []


def test_a_collate_padding_token_by_token_is_the_loop_not_an_operator(tmp_path):
    """A red-team collate_fn padding token by token: aten::select's 1.7M calls were told
    "passes over memory ... bfloat16", inside the loading already counted. The loop is the
    candidate; the loading and the operator it explains have no gain of their own."""
    pytest.importorskip("torch")
    source = """\
        import torch
        from torch.utils.data import DataLoader
        torch.manual_seed(0)
        data = [torch.randint(1, 50, (int(n),)) for n in torch.randint(20, 80, (2000,))]
        def collate(batch):
            L = max(len(s) for s in batch)
            out = torch.zeros(len(batch), L, dtype=torch.long)
            for b, s in enumerate(batch):
                for t, tok in enumerate(s):
                    out[b, t] = tok
            return out
        emb = torch.nn.EmbeddingBag(50, 8)
        opt = torch.optim.SGD(emb.parameters(), 0.1)
        for epoch in range(4):
            for x in DataLoader(data, batch_size=32, collate_fn=collate):
                opt.zero_grad(); loss = emb(x).pow(2).mean(); loss.backward(); opt.step()
        print("done")
        """
    db, out, cands = profile(tmp_path, source)
    (c,) = of_rule(cands, "python-loop")
    assert c["location"].endswith("(collate)"), c
    for other in of_rule(cands, "torch-operator") + of_rule(cands, "data-loading"):
        if other["rule"] == "torch-operator" and other["evidence"]["ms_per_call"] > 0.02:
            continue
        # (On a host whose other programs leave no core for a worker, the loading's own bound
        # is 0 first: "none from workers", seen in a loaded run.)
        assert other["est_gain_s"] == 0 and ("(collate)) is acted on" in other["gain_bound"] or (
            other["rule"] == "data-loading" and "none from workers" in other["gain_bound"])), other


TINY_TRAINING = """\
    import torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), 0.01)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    def train():
        for step in range(1500):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2).mean()
            loss.backward()
            opt.step()
        return loss.item()
    print(f"{train():.4f}")
    """


def test_the_training_loop_of_a_tiny_model_is_no_python_loop(tmp_path):
    """A tiny model's training loop makes thousands of small operator calls too, but each
    iteration is a step (backward, optimizer): that loop is the program, not one to write over
    whole tensors."""
    pytest.importorskip("torch")
    _, _, cands = profile(tmp_path, TINY_TRAINING)
    assert of_rule(cands, "python-loop") == [], of_rule(cands, "python-loop")


SMALL_BATCH = """\
    import sys, torch
    import torch.nn as nn, torch.nn.functional as F
    torch.manual_seed(0)
    B, W = int(sys.argv[1]), int(sys.argv[2])
    X = torch.randn(2048, 64); Y = torch.randint(0, 10, (2048,))
    net = nn.Sequential(nn.Linear(64, W), nn.ReLU(), nn.Linear(W, W), nn.ReLU(),
                        nn.Linear(W, 10))
    opt = (torch.optim.Adam if sys.argv[3:] == ["adam"] else torch.optim.SGD)(net.parameters(),
                                                                             lr=0.01)
    def train():
        for i in range(0, len(X), B):
            opt.zero_grad()
            loss = F.cross_entropy(net(X[i:i + B]), Y[i:i + B])
            loss.backward()
            opt.step()
        return loss.item()
    print(f"{train():.3f}")
    """


def test_a_training_loop_at_batch_4_is_its_operators_cost(tmp_path):
    """An MLP trained at batch 4: 512 iterations of 89 operators a few microseconds each, the
    FLOPs 5 % of the time, read "no tuning candidates" (and at batch 64 the same samples ran
    7.7 times faster). small-operators names the loop, its figures are the breakdown's and the
    tree's; at batch 64 through layers of 1024 (32 iterations) the arithmetic is most of each
    iteration and it says nothing."""
    pytest.importorskip("torch")
    db, _, cands = profile(tmp_path, SMALL_BATCH, "4", "128")
    found = of_rule(cands, "small-operators")
    assert len(found) == 1, [c["rule"] for c in cands]
    c, ev = found[0], found[0]["evidence"]
    assert c["location"].endswith("(train)"), c
    assert ev["iterations"] == 512, ev
    (ops,), = query(db, "SELECT SUM(n.calls) FROM nodes n JOIN routines r USING (routine_id) "
                        "JOIN nodes p ON p.node_id = n.parent_id WHERE r.kind = 'torch'")
    # The loop's operators, each pays its call: no more than the run's, most of them.
    assert 0.9 * ops <= ev["operators_per_iteration"] * 512 <= ops, (ops, ev)
    assert ev["us_per_operator"] < 20 and ev["arithmetic_us"] < 0.25 * ev["iteration_us"], ev
    assert ev["gemm_smallest_side"] == 4, ev
    assert c["est_gain_s"] == pytest.approx(ev["fixed_s"] / 2, rel=1e-3), c
    assert "larger batch" in c["advice"] and "torch.jit.script" in c["advice"], c["advice"]
    # Its operators of a microsecond are its, not candidates of their own.
    for op in of_rule(cands, "torch-operator"):
        assert op["evidence"]["ms_per_call"] >= 0.02 or op["est_gain_s"] == 0, op
    _, _, cands = profile(tmp_path, SMALL_BATCH, "64", "1024")
    assert of_rule(cands, "small-operators") == [], of_rule(cands, "small-operators")


def test_torch_optims_loop_in_a_loop_of_small_operators_waits_for_it(tmp_path):
    """Adam over 6 tensors at batch 8: its per-parameter loop (_single_tensor_adam) is in the
    iterations whose small operators the small-operators candidate prices, and as small. A red
    team's read an optimizer-update candidate of 0.202 s beside that one's 0.794 s, and the
    foreach=True it was told to time made the update 50-65 % slower, where a batch twice as
    large halved it with the rest of the loop: the update keeps its evidence, no gain."""
    pytest.importorskip("torch")
    _, _, cands = profile(tmp_path, SMALL_BATCH, "8", "256", "adam")
    assert len(of_rule(cands, "small-operators")) == 1, [c["rule"] for c in cands]
    update = [c for c in of_rule(cands, "optimizer-update")
              if c["location"].endswith("(_single_tensor_adam)")]
    assert len(update) == 1, [(c["rule"], c["location"]) for c in cands]
    assert update[0]["est_gain_s"] == 0, update[0]
    assert "until the small-operators candidate" in update[0]["gain_bound"], update[0]
    assert update[0]["evidence"]["time_s"] > 0, update[0]


DEBUG_TOOLS = """\
    import contextlib, sys, torch
    import torch.nn as nn, torch.nn.functional as F
    torch.manual_seed(0)
    tool = sys.argv[1]
    m = nn.Sequential(*[nn.Sequential(nn.Linear(32, 32), nn.LayerNorm(32), nn.GELU())
                        for _ in range(4)], nn.Linear(32, 10))
    if tool == "norms":  # hooks torch installs to compute the model's weights
        from torch.nn.utils import prune, spectral_norm, weight_norm
        lin = [mod for mod in m.modules() if isinstance(mod, nn.Linear)]
        for mod in lin[:3]:
            spectral_norm(mod)
        weight_norm(lin[3])
        prune.l1_unstructured(lin[4], "weight", 0.3)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randint(0, 10, (16,))
    torch.autograd.set_detect_anomaly(tool == "anomaly")
    seen = []
    if tool == "hooks":
        for mod in m.modules():
            if isinstance(mod, nn.Linear):
                mod.register_forward_hook(lambda mod, i, o: seen.append(o.norm().item()))
                mod.register_full_backward_hook(lambda mod, gi, go: seen.append(go[0].norm().item()))
    ctx = (torch.profiler.profile(record_shapes=True, with_stack=True) if tool == "profiler"
           else contextlib.nullcontext())
    def train():
        with ctx:
            for step in range(60):
                opt.zero_grad()
                loss = F.cross_entropy(m(x), y)
                loss.backward()
                opt.step()
        return loss.item()
    print(f"{train():.3f}")
    """


@pytest.mark.parametrize("tool", ["anomaly", "profiler", "hooks", "none", "norms"])
def test_debugging_aids_left_on_are_named(tmp_path, tool):
    """Anomaly mode (2.8x slower in a red-team MLP), torch.profiler around the loop (50x) and
    logging module hooks (42 % of a loop): "no tuning candidates" each, every operator a little
    slower and none slow. Each is a
    candidate of its own now, its time measured (the stack records an operator makes, the
    backward's NaN checks; the profiler's frames), and the per-operator figures it inflates
    wait for it; with neither on (torch.optim's record_function every step), neither fires."""
    pytest.importorskip("torch")
    db, _, cands = profile(tmp_path, DEBUG_TOOLS, tool)
    anomaly, prof = of_rule(cands, "anomaly-mode"), of_rule(cands, "torch-profiler")
    hooks = of_rule(cands, "module-hooks")
    if tool in ("none", "norms"):
        # spectral_norm's, weight_norm's and pruning's hooks are the model's weights, no
        # logging to remove (a red team's discriminator was told to remove them).
        assert anomaly == [] and prof == [] and hooks == [], anomaly + prof + hooks
        return
    (c,) = {"anomaly": anomaly, "profiler": prof, "hooks": hooks}[tool]
    assert c is cands[0], [x["rule"] for x in cands]
    ev = c["evidence"]
    if tool == "anomaly":
        # One stack record per operator the forward calls from Python, by the tree.
        (records,), = query(db, "SELECT SUM(n.calls) FROM nodes n JOIN routines r USING "
                                "(routine_id) JOIN nodes p ON p.node_id = n.parent_id JOIN "
                                "routines pr ON pr.routine_id = p.routine_id WHERE r.file "
                                "LIKE '%/traceback.py' AND pr.kind = 'torch'")
        assert ev["stack_records"] == records >= 60 * 13, (ev, records)
        assert ev["nan_checks"] > 0 and c["est_gain_s"] == pytest.approx(ev["time_s"]), c
    elif tool == "profiler":
        assert c["location"].endswith("(train)") and ev["profiler_s"] > 0, c
        assert "schedule" in c["advice"], c["advice"]
    else:
        # A forward hook per Linear (5) per step (60), and their full backward hooks' set-up.
        assert c["location"].endswith("(<lambda>)") and ev["hook_calls"] >= 5 * 60, c
        assert ev["backward_hooks_s"] > 0 and "handle.remove()" in c["advice"], c
    for other in of_rule(cands, "small-operators"):
        assert other["est_gain_s"] == 0 and "is acted on" in other["gain_bound"], other


EMBEDDING = """\
    import sys, torch
    import torch.nn as nn
    torch.manual_seed(0)
    sparse = sys.argv[1] == "sparse"
    emb, head = nn.Embedding(200_000, 32, sparse=sparse), nn.Linear(32, 1)
    opts = ([torch.optim.SparseAdam(emb.parameters()), torch.optim.Adam(head.parameters())]
            if sparse else [torch.optim.Adam(list(emb.parameters()) + list(head.parameters()))])
    def train():
        for step in range(8):
            idx = torch.randint(0, 200_000, (128, 10))
            y = torch.randn(128, 1)
            for o in opts: o.zero_grad()
            loss = ((head(emb(idx).mean(1)) - y) ** 2).mean()
            loss.backward()
            for o in opts: o.step()
        return loss.item()
    print(f"{train():.3f}")
    """


def test_an_embeddings_dense_gradient_is_told_sparse(tmp_path):
    """A 400,000 x 64 table trained with dense gradients: the backward built the whole table's
    gradient each step (65 ms against a 0.5 ms lookup) and Adam updated every row; sparse=True
    with SparseAdam ran the loop in 0.24 s instead of 4.4 s, and sonde named Adam's foreach (a
    red-team find). The candidate names sparse gradients, its figures the tree's, and the
    backward's own torch-operator candidate waits for it; with sparse=True it says nothing."""
    pytest.importorskip("torch")
    db, _, cands = profile(tmp_path, EMBEDDING, "dense")
    (c,) = of_rule(cands, "embedding-dense-grad")
    ev = c["evidence"]
    ((backward, calls),) = query(db, "SELECT SUM(n.incl_ns) / 1e9, SUM(n.calls) FROM nodes n "
                                     "JOIN routines r USING (routine_id) "
                                     "WHERE r.name = 'aten::embedding_backward'")
    assert calls == ev["backward_calls"] == 8 and ev["backward_s"] == pytest.approx(backward)
    assert ev["backward_over_lookup"] >= 10, ev
    assert "sparse=True" in c["advice"] and "SparseAdam" in c["advice"], c["advice"]
    for op in of_rule(cands, "torch-operator"):
        if op["location"] == "aten::embedding_backward":
            assert op["est_gain_s"] == 0 and "embedding-dense-grad" in op["gain_bound"], op
    _, _, cands = profile(tmp_path, EMBEDDING, "sparse")
    assert of_rule(cands, "embedding-dense-grad") == [], of_rule(cands, "embedding-dense-grad")


def test_a_one_off_build_outside_the_loop_says_so(tmp_path):
    """A dataset built once by a per-row loop, then a short training loop: the python-loop
    candidate ranked among the per-step costs of a 30-step profile with nothing saying it would
    not grow with the steps (a red-team find). It says its one call ran outside the loop's
    iterations; the loss computed per element inside them is in the loop."""
    pytest.importorskip("torch")
    _, _, cands = profile(tmp_path, """\
        import torch
        torch.manual_seed(0)
        def build_dataset(n):
            rows = []
            for i in range(n):
                r = torch.randn(8)
                rows.append((r - r.mean()) / (r.std() + 1e-6))
            return torch.stack(rows)
        X = build_dataset(6000)
        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), 0.01)
        def train():
            for step in range(30):
                opt.zero_grad(); loss = model(X).pow(2).mean(); loss.backward(); opt.step()
            return loss.item()
        print(f"{train():.4f}")
        """)
    (c,) = [c for c in of_rule(cands, "python-loop") if c["location"].endswith("(build_dataset)")]
    assert c["evidence"]["calls_in_loop"] == 0, c["evidence"]
    assert "its one call ran outside the training loop's 30 iterations" in c["summary"], c["summary"]
    db, _, cands = profile(tmp_path, MASKED_LOSS)
    (c,) = of_rule(cands, "python-loop")
    assert c["evidence"]["calls_in_loop"] == 25 and "outside the training" not in c["summary"], c


def test_a_loss_summed_per_sample_inside_the_training_loop_is_a_python_loop(tmp_path):
    """A loss summed sample by sample in the training loop's own frame: the rule exempted any
    function running the backward, so the loop inside it read "no tuning candidates" (7.5x
    faster vectorised, a red-team find), while the same loop in a helper was found. The
    training loop's small calls made many times a step are the candidate, per step; the
    small-operators candidate that the same calls inflate waits for it."""
    pytest.importorskip("torch")
    db, _, cands = profile(tmp_path, """\
        import torch
        import torch.nn.functional as F
        torch.manual_seed(0)
        model = torch.nn.Linear(16, 10)
        opt = torch.optim.SGD(model.parameters(), 0.01)
        x, y = torch.randn(64, 16), torch.randint(0, 10, (64,))
        def train():
            for step in range(40):
                opt.zero_grad()
                out = model(x)
                loss = 0
                for j in range(64):
                    loss = loss + F.cross_entropy(out[j:j + 1], y[j:j + 1])
                loss.backward()
                opt.step()
            return loss.item()
        print(f"{train():.3f}")
        """)
    (c,) = of_rule(cands, "python-loop")
    ev = c["evidence"]
    assert c["location"].endswith("(train)") and ev["training_steps"] == 40, c
    assert ev["most_per_site_call"] >= 64 and "inside each of its 40 training steps" in c["summary"]
    assert "outside the training loop" not in c["summary"], c["summary"]
    (calls,), = query(db, "SELECT SUM(n.calls) FROM nodes n JOIN routines r USING (routine_id) "
                          "WHERE r.name = 'aten::cross_entropy_loss'")
    assert calls == 40 * 64 and "(cross_entropy) x2560" in ev["calls_of"], ev
    for other in of_rule(cands, "small-operators"):
        assert other["est_gain_s"] == 0 and "python-loop" in other["gain_bound"], other


def test_a_training_loop_stepping_in_a_helper_is_no_python_loop(tmp_path):
    """The backward and the optimizer step in a helper the loop calls (apply_grads): the loop is
    the training loop all the same (a red team's read as a loop to write over whole tensors)."""
    pytest.importorskip("torch")
    _, _, cands = profile(tmp_path, """\
        import torch
        import torch.nn.functional as F
        torch.manual_seed(0); torch.set_num_threads(1)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        X = torch.randn(4000, 4); Y = X.sum(1, keepdim=True)
        def apply_grads(loss):
            opt.zero_grad(); loss.backward(); opt.step()
        def train():
            tot = 0.0
            for i in range(0, len(X), 4):
                loss = F.mse_loss(model(X[i:i + 4]), Y[i:i + 4])
                apply_grads(loss)
                tot += loss.item()
            return tot
        print(f"{train():.3f}")
        """)
    assert of_rule(cands, "python-loop") == [], of_rule(cands, "python-loop")


def test_a_loop_recording_into_a_meters_update_is_a_python_loop(tmp_path):
    """An AverageMeter.update() called in the loop is no optimizer step, whatever its name: it
    exempted a per-sample loss loop (0.085 s -> 0.001 s vectorised, a red-team find)."""
    pytest.importorskip("torch")
    _, _, cands = profile(tmp_path, """\
        import torch
        torch.manual_seed(0)
        class AverageMeter:
            def __init__(self): self.sum, self.n = 0.0, 0
            def update(self, v, n=1): self.sum += v * n; self.n += n
        P = torch.randn(15000, 8); Y = torch.randint(0, 8, (15000,))
        def per_sample_loss(meter):
            for i in range(len(P)):
                meter.update((-torch.log_softmax(P[i], -1)[Y[i]]).item())
            return meter.sum / meter.n
        print(f"{per_sample_loss(AverageMeter()):.4f}")
        """)
    (c,) = of_rule(cands, "python-loop")
    assert c["location"].endswith("(per_sample_loss)"), c


def test_a_per_row_helper_of_several_numpy_calls_is_a_python_loop(tmp_path):
    """np.array([features(r) for r in A]), seven numpy calls a row: the helper took more than
    20 us a call, so neither it nor its caller was a loop (0.76 s -> 0.013 s vectorised, a
    red-team find). A helper of small library calls counts up to 200 us a call."""
    db, _, cands = profile(tmp_path, """\
        import numpy as np
        A = np.random.default_rng(0).standard_normal((8000, 16))
        def features(r):
            return (np.mean(r), np.std(r), np.max(r), np.min(r), np.median(r),
                    np.sum(np.abs(r)), np.linalg.norm(r))
        def all_features():
            return np.array([features(r) for r in A])
        print(f"{all_features().sum():.3f}")
        """)
    (c,) = of_rule(cands, "python-loop")
    assert c["location"].endswith("(all_features)"), c
    assert "(features) x8000" in c["evidence"]["calls_of"], c
    (mean_ns,), = query(db, "SELECT SUM(n.incl_ns) / SUM(n.calls) FROM nodes n JOIN routines r "
                            "USING (routine_id) WHERE r.name LIKE '%(features)'")
    assert mean_ns > 20000 or c["evidence"]["us_per_call"] <= 20, mean_ns
    assert "Where each step needs the last" in c["advice"], c["advice"]


def test_small_matrix_products_one_at_a_time_are_a_python_loop(tmp_path):
    """3x3 rotations applied one point at a time with `@` (a red team's: 300,000 products, 80 %
    of its run; stacked, 0.329 -> 0.016 s): numpy calls the BLAS from C, with no frame of its
    own between, and only gemm-shape fired, est. 0.020 s. The loop is the candidate, told to
    stack the products, and the shape's candidate waits for it."""
    source = """\
        import sys, numpy as np
        rng = np.random.default_rng(12)
        N = 20000
        th = rng.uniform(0, 6.28, N); c, s = np.cos(th), np.sin(th)
        R = np.zeros((N, 3, 3)); R[:, 0, 0] = c; R[:, 0, 1] = -s; R[:, 1, 0] = s
        R[:, 1, 1] = c; R[:, 2, 2] = 1
        P = rng.standard_normal((N, 3)); T = rng.standard_normal((N, 3, 3))
        def rotate(R, P, T):
            if sys.argv[1:] == ["vec"]:
                return (R @ P[..., None])[..., 0], R @ T
            out = np.empty_like(P); out2 = np.empty_like(T)
            for i in range(len(R)):
                out[i] = R[i] @ P[i]
                out2[i] = R[i] @ T[i]
            return out, out2
        o, o2 = rotate(R, P, T)
        print(f"{o.sum():.6f} {o2.sum():.6f}")
        """
    db, out, cands = profile(tmp_path, source)
    (c,) = of_rule(cands, "python-loop")
    e = c["evidence"]
    assert c["location"].endswith("(rotate)"), c
    (blas_calls,), = query(db, "SELECT SUM(n.calls) FROM nodes n JOIN routines r USING "
                               "(routine_id) JOIN nodes p ON p.node_id = n.parent_id JOIN "
                               "routines rp ON rp.routine_id = p.routine_id WHERE r.kind = "
                               "'blas' AND rp.name LIKE '%(rotate)'")
    # The products, and the two empty_like calls that make the outputs.
    assert blas_calls == 2 * 20000 and e["small_calls"] == blas_calls + 2, (e, blas_calls)
    assert "dgemm" in e["calls_of"], e
    assert "one np.matmul over the stacked arrays" in c["advice"], c["advice"]
    assert "torch" not in c["advice"], c["advice"]
    for shape in of_rule(cands, "gemm-shape") + of_rule(cands, "matrix-vector"):
        if "(rotate)" in shape["location"] or shape["evidence"].get("caller", "").endswith(
                "(rotate)"):
            assert shape["est_gain_s"] == 0 and "python-loop" in shape["gain_bound"], shape
    _, out_vec, cands_vec = profile(tmp_path, source, "vec")
    assert [float(x) for x in out_vec.split()] == pytest.approx([float(x) for x in out.split()])
    assert of_rule(cands_vec, "python-loop") == []


def test_a_recurrent_cell_stepped_in_python_is_told_the_fused_layer(tmp_path):
    """A GRUCell stepped over 20,000 time steps: a recurrence no rewrite over whole tensors
    removes. The advice is nn.GRU over the sequence (a red team measured 37 % gained, not the
    90 % a loop's estimate says: 0.4 of the time here), and aten::gru_cell's own candidate is
    the loop's time, not a second claim on it."""
    pytest.importorskip("torch")
    _, _, cands = profile(tmp_path, """\
        import torch
        torch.manual_seed(0); torch.set_num_threads(1)
        gru = torch.nn.GRUCell(4, 4)
        xs = torch.randn(20000, 1, 4)
        def run():
            h = torch.zeros(1, 4)
            with torch.no_grad():
                for x in xs:
                    h = gru(x, h)
            return h
        print(f"{float(run().sum()):.4f}")
        """)
    (c,) = of_rule(cands, "python-loop")
    e = c["evidence"]
    assert e["loop"] == "recurrent cell" and "aten::gru_cell" in e["operators"], e
    assert "nn.GRU" in c["advice"] and "over the whole sequence" in c["advice"], c["advice"]
    assert c["est_gain_s"] == pytest.approx(0.4 * (e["own_s"] + e["small_s"]), rel=1e-3), c
    for op in of_rule(cands, "torch-operator"):
        if op["location"] == "aten::gru_cell":
            assert op["est_gain_s"] == 0 and "(run)) is acted on" in op["gain_bound"], op


def test_numpy_linalg_of_float32_arrays_is_not_told_float32(tmp_path):
    """numpy.linalg computes in float64 whatever its inputs: an all-float32 program's dgesv_
    was told "compute in float32" (est. 0.277 s; float32 input ran no faster, a red-team
    find). The float64 rule judges matrix products (GEMM, SYRK, oneDNN) only."""
    db, _, cands = profile(tmp_path, """\
        import numpy as np
        rng = np.random.default_rng(0)
        A = (rng.standard_normal((600, 600)) + 600 * np.eye(600)).astype(np.float32)
        s = 0.0
        for _ in range(6):
            s += float(np.linalg.inv(A).sum())
        print(f"{s:.4f}")
        """)
    assert query(db, "SELECT COUNT(*) FROM routines WHERE name = 'dgesv_'")[0][0] == 1
    assert of_rule(cands, "float64") == [], of_rule(cands, "float64")


EMA = """\
    import copy, torch
    import torch.nn as nn, torch.nn.functional as F
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(24) for m in (nn.Linear(32, 32), nn.ReLU())],
                          nn.Linear(32, 5))
    ema = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    X, Y = torch.randn(2048, 32), torch.randint(0, 5, (2048,))
    def ema_update(decay=0.99):
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.mul_(decay).add_(pm, alpha=1 - decay)
    for it in range(200):
        i = (it * 16) % 2048
        opt.zero_grad()
        F.cross_entropy(model(X[i:i + 16]), Y[i:i + 16]).backward()
        opt.step()
        ema_update()
    print(f"{sum(p.sum().item() for p in ema.parameters()):.4f}")
    """


def test_an_update_loop_over_parameters_is_one_candidate(tmp_path):
    """An EMA of the weights written as a loop over parameters (pe.mul_(d).add_(pm)): a red
    team's read an optimizer-update candidate (torch._foreach_*) and a python-loop candidate of
    the same function, 0.193 + 0.126 s of its 0.241 s, for the one rewrite that saved 0.08-0.095
    s. The loop's gain waits for the update's."""
    pytest.importorskip("torch")
    _, _, cands = profile(tmp_path, EMA)
    update = [c for c in of_rule(cands, "optimizer-update") if c["location"].endswith("(ema_update)")]
    loop = [c for c in of_rule(cands, "python-loop") if c["location"].endswith("(ema_update)")]
    assert update and update[0]["est_gain_s"] > 0, [c["rule"] + " " + c["location"] for c in cands]
    for c in loop:
        assert c["est_gain_s"] == 0 and "optimizer-update candidate" in c["gain_bound"], c


PREFETCHER = """\
    import queue, sys, threading, torch
    import torch.nn as nn, torch.nn.functional as F
    torch.manual_seed(0)
    def load(i):
        g = torch.Generator().manual_seed(i)
        x = torch.randn(64, 3, 32, 32, generator=g)
        for _ in range(3):  # the batch's "augmentation", on the loading thread
            x = F.avg_pool2d(x, 3, 1, 1)
        return x, torch.randint(0, 10, (64,), generator=g)
    def batches(n):
        q = queue.Queue(2)
        def work():
            for i in range(n):
                q.put(load(i))
            q.put(None)
        threading.Thread(target=work, daemon=True).start()
        while (b := q.get()) is not None:
            yield b
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4),
                          nn.Flatten(), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches(int(sys.argv[1])):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    print("done")
    """


def test_an_operator_on_a_loading_thread_is_beside_the_loop_not_outside_it(tmp_path):
    """A threaded prefetcher's per-batch avg_pool2d: a red team's read "all its 180 calls ran
    outside the training loop's 60 iterations (set-up, an evaluation, teardown): a cost that does
    not grow with the steps", and 360 calls at 120 steps. It ran on the loading thread, beside
    the loop: said so, and its calls there counted."""
    pytest.importorskip("torch")
    for steps in (20, 40):
        db, _, cands = profile(tmp_path, PREFETCHER, str(steps))
        pool = [c for c in cands if c["location"] == "aten::avg_pool2d"]
        assert pool, [c["rule"] + " " + c["location"] for c in cands]
        for c in pool:
            assert c["evidence"]["calls_in_loop"] == 0, c["evidence"]
            assert c["evidence"]["calls_on_other_threads"] == 3 * steps, c["evidence"]
            assert "does not grow with the steps" not in c["summary"], c["summary"]
            assert "on threads with no training loop" in c["summary"], c["summary"]
