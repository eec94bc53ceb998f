"""Exact counts, timing truth and tree consistency."""
from conftest import BIN, MLP, query, routine_calls, run


def test_eight_threads_million_calls_each_are_counted_exactly(db):
    r = run([BIN / "blas_threads", 8, 1_000_000], db)
    assert r.returncode == 0, r.stderr
    assert routine_calls(db, "cblas_sdot") == 8_000_000
    # One row per thread that made calls, each with exactly its share.
    per_thread = query(db, "SELECT n.calls FROM nodes n JOIN routines r USING (routine_id) "
                           "WHERE r.name = 'cblas_sdot'")
    assert sorted(c for (c,) in per_thread) == [1_000_000] * 8
    assert query(db, "SELECT calls FROM hotspots WHERE routine = 'cblas_sdot'") == [(8_000_000,)]
    # The element type the BLAS table states for the routine (routines.dtype), shapes or not;
    # routines registered and never called have no row.
    assert query(db, "SELECT name, dtype FROM routines WHERE kind = 'blas'") == [
        ("cblas_sdot", "f32")]


def test_routines_carry_the_element_type_their_table_states(db):
    # numpy's products reach OpenBLAS's cblas_?gemm for each element type.
    prog = ("import numpy as np\n"
            "for t in (np.float32, np.float64, np.complex64, np.complex128):\n"
            "    a = np.ones((64, 64), dtype=t)\n"
            "    a @ a\n")
    r = run(["/usr/bin/python3", "-c", prog], db)
    assert r.returncode == 0, r.stderr
    facts = dict(query(db, "SELECT name, dtype FROM routines WHERE name LIKE 'cblas_%gemm'"))
    assert facts == {"cblas_sgemm": "f32", "cblas_dgemm": "f64", "cblas_cgemm": "c64",
                     "cblas_zgemm": "c128"}


def test_a_routine_of_known_time_is_reported_within_five_percent(db):
    calls, micros, sleep_ms = 10, 20_000, 200
    r = run([BIN / "known_time", calls, micros, sleep_ms], db)
    assert r.returncode == 0, r.stderr
    [(n, incl, excl, flops)] = query(
        db, "SELECT SUM(calls), SUM(incl_ns), SUM(excl_ns), SUM(flops) FROM nodes "
            "JOIN routines USING (routine_id) WHERE name = 'cblas_dgemm'")
    assert n == calls
    # cblas_dgemm reaches dgemm_ inside the BLAS: one call, not two.
    assert routine_calls(db, "dgemm_") == 0
    measured = dict(line.split() for line in r.stdout.splitlines()[1:])
    truth = float(measured["dgemm_us"]) * 1e3
    assert abs(incl - truth) / truth < 0.05, incl
    assert abs(excl - truth) / truth < 0.05, excl
    assert flops == calls * 2 * micros * 7 * 5  # exact for the cost model: 2 M N K
    [(sleep_ns,)] = query(db, "SELECT incl_ns FROM nodes JOIN routines USING (routine_id) "
                              "WHERE name = 'sleep'")
    slept = float(measured["sleep_us"]) * 1e3
    assert abs(sleep_ns - slept) / slept < 0.05, (sleep_ns, slept)


def test_inclusive_equals_exclusive_plus_children(db):
    r = run([MLP, "--steps", 40], db, OPENBLAS_NUM_THREADS=1)
    assert r.returncode == 0, r.stderr
    rows = query(db, "SELECT p.node_id, p.incl_ns, p.excl_ns, COALESCE(SUM(c.incl_ns), 0), "
                     "COUNT(c.node_id) FROM nodes p LEFT JOIN nodes c ON c.parent_id = p.node_id "
                     "GROUP BY p.node_id")
    assert len(rows) > 10
    for node, incl, excl, children, count in rows:
        # Each figure is rounded to the nanosecond once, when ticks are converted.
        assert abs(incl - (excl + children)) <= 2 * (count + 1), (node, incl, excl, children)
        assert excl >= 0 and children <= incl + 2 * count


def test_cost_models_are_exact_on_a_real_workload(db):
    steps = 25
    r = run([MLP, "--steps", steps, "--eval-every", 1000], db, OPENBLAS_NUM_THREADS=1)
    assert r.returncode == 0, r.stderr
    shapes = {(m, n, k): (calls, flops) for m, n, k, calls, flops in query(
        db, "SELECT m, n, k, SUM(calls), SUM(flops) FROM shapes GROUP BY m, n, k")}
    for (m, n, k), (calls, flops) in shapes.items():
        assert flops == 2 * m * n * k * calls
    # The forward products of 784-1000-1000-10 with batch 100, once per training step (the
    # final evaluation adds its own calls on top).
    for shape in [(100, 1000, 784), (100, 1000, 1000), (100, 10, 1000)]:
        assert shapes[shape][0] >= steps


def test_subnormal_operands_are_flagged_and_normal_ones_are_not(tmp_path):
    """Subnormal operands are counted; so are normal ones whose products are subnormal (1e-20
    by 1e-20: a red-team layer of weights decayed to 1e-30 ran 2.8 times slower, its operands
    clean, and read no FTZ advice); normal operands of normal products are neither."""
    flagged, products = {}, {}
    for kind in ("subnormal", "normal", "products"):
        db = tmp_path / f"{kind}.db"
        r = run([BIN / "subnormal_gemm", kind], db, OPENBLAS_NUM_THREADS=1)
        assert r.returncode == 0, r.stderr
        info = dict(query(db, "SELECT key, value FROM run_info WHERE key LIKE "
                              "'blas.subnormal.%'"))
        assert int(info["blas.subnormal.sampled_calls"]) >= 1  # the first call is sampled
        flagged[kind] = (int(info["blas.subnormal.values"]),
                         query(db, "SELECT COUNT(*) FROM notes WHERE topic = 'denormals'")[0][0])
        products[kind] = int(info["blas.subnormal.product_calls"])
    assert flagged["subnormal"][0] > 0 and flagged["subnormal"][1] == 1
    assert flagged["normal"] == (0, 0) and products["normal"] == 0
    assert flagged["products"] == (0, 1) and products["products"] >= 1, (flagged, products)
    # Subnormal operands are counted as such, not again as products.
    assert products["subnormal"] == 0
