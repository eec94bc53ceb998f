"""CUDA graph replays keep their origin (tests/stubs/cupti, cupti_stub_graphs.cpp): a kernel a
graph runs is counted under the cudaGraphLaunch that replayed it, as before, and also under the
call path where its graph node was created: a launch captured during a stream capture, or a
cudaGraphAddKernelNode call. The instantiated graph's nodes are copies, whose records carry
the copy's id: each must lead back to the original's call path."""
import json

import pytest

from conftest import BIN, CLI, query, run
from test_cupti import CUPTI, DRIVER_DIR, STUBS, notes

pytestmark = pytest.mark.skipif(
    not STUBS, reason="CUPTI headers absent at configure time: no CUPTI backend, no stub")

REPLAYS = 7


def run_graphs(db, mode="graph_capture", *args):
    r = run([BIN / "cupti_app", mode, *args], db=db, SONDE_CUPTI_LIBRARY=CUPTI,
            LD_LIBRARY_PATH=DRIVER_DIR)
    assert r.returncode == 0, r.stderr
    assert f"done {mode}" in r.stdout
    return r


def info(db, key):
    rows = query(db, "SELECT value FROM run_info WHERE key = ?", (key,))
    return rows[0][0] if rows else None


def by_origin(db):
    """(kernel, capture path, replaying path): records, from the public view."""
    return {(k, o, c): n for k, o, c, n in query(
        db, "SELECT name, origin_path, call_path, records FROM gpu_graph_kernels "
            "WHERE kind = 'kernel'")}


def test_a_replayed_kernel_is_counted_under_its_capture_path_and_its_replay(db):
    run_graphs(db, "graph_capture", str(REPLAYS))
    assert by_origin(db) == {
        ("conv()", "capture;conv;cudaLaunchKernel", "replay;cudaGraphLaunch"): REPLAYS,
        ("relu()", "capture;relu;cudaLaunchKernel", "replay;cudaGraphLaunch"): 2 * REPLAYS,
        ("added()", "build;cudaGraphAddKernelNode", "replay_built;cudaGraphLaunch"): 2,
    }
    # Still under the replay, as before: the launching call path is the cudaGraphLaunch.
    launched = dict(query(db, "SELECT call_path, SUM(calls) FROM gpu_kernels GROUP BY call_path"))
    assert launched == {"replay;cudaGraphLaunch": 3 * REPLAYS,
                        "replay_built;cudaGraphLaunch": 2}
    calls = dict(query(db, "SELECT path, calls FROM callpaths"))
    assert calls["replay;cudaGraphLaunch"] == REPLAYS
    assert calls["capture;relu;cudaLaunchKernel"] == 2  # captured: launched once each
    assert calls["capture;cudaGraphInstantiate"] == 1
    # Every graph record found its origin, although the graphs were destroyed before the
    # flush that took the last records.
    assert info(db, "gpu.graph_records") == str(3 * REPLAYS + 2)
    assert info(db, "gpu.graph_unknown") == "0"
    assert info(db, "gpu.unattributed") == "0"
    assert notes(db) == []


def test_origins_per_node_add_up_to_the_replayed_device_time(db):
    run_graphs(db, "graph_capture", str(REPLAYS))
    # The stub's kernels take 1 ms: the device time at each capture path is its records'.
    rows = query(db, "SELECT p.path, o.records, o.ns FROM gpu_graph_origins o "
                     "JOIN node_paths p USING (node_id) ORDER BY p.path")
    assert rows == [("build;cudaGraphAddKernelNode", 2, 2_000_000),
                    ("capture;conv;cudaLaunchKernel", REPLAYS, REPLAYS * 1_000_000),
                    ("capture;relu;cudaLaunchKernel", 2 * REPLAYS, 2 * REPLAYS * 1_000_000)]
    total_graph = sum(r[2] for r in rows)
    replayed = query(db, "SELECT SUM(gpu_s) FROM callpaths WHERE path LIKE '%cudaGraphLaunch'")
    assert round(replayed[0][0] * 1e9) == total_graph


def test_sonde_tree_shows_replays_at_their_capture_paths(db):
    run_graphs(db, "graph_capture", str(REPLAYS))
    for merge in ([], ["--threads", "merge"]):
        r = run([CLI, "tree", db, "--format", "json", "--min-pct", "0", *merge])
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        root = doc["tree"] if merge else doc["trees"][0]["tree"]

        def find(node, *names):
            for name in names:
                node = next(c for c in node["children"] if c["name"] == name)
            return node

        conv = find(root, "capture", "conv", "cudaLaunchKernel")
        assert conv["graph_s"] == pytest.approx(REPLAYS * 1e-3)
        assert conv["gpu_s"] == 0  # nothing ran when it was called
        assert find(root, "capture")["graph_s"] == pytest.approx(3 * REPLAYS * 1e-3)
        replay = find(root, "replay", "cudaGraphLaunch")
        assert replay["gpu_s"] == pytest.approx(3 * REPLAYS * 1e-3)
        assert replay["graph_s"] == 0
        assert root["graph_s"] == pytest.approx(root["gpu_s"])  # every graph record has one
    text = run([CLI, "tree", db]).stdout
    assert "graph s" in text and "captured (created) at this path" in text


def test_sonde_metrics_lists_replays_by_capture_path(db):
    run_graphs(db, "graph_capture", str(REPLAYS))
    r = run([CLI, "metrics", db, "--section", "graphs", "--format", "json"])
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)["graphs"]
    got = {(x["kernel"], x["captured_at"], x["replayed_by"]): x["records"] for x in rows}
    assert got[("relu()", "capture;relu;cudaLaunchKernel", "replay;cudaGraphLaunch")] == \
        2 * REPLAYS
    text = run([CLI, "metrics", db, "--section", "graphs"]).stdout
    assert "capture;conv;cudaLaunchKernel" in text


def test_a_full_table_of_graph_nodes_is_said(db):
    run_graphs(db, "graph_many")
    (note,) = notes(db, "gpu-graphs")
    assert "table of graph node origins was full" in note
    assert int(info(db, "gpu.graph_nodes_full")) > 0
    # What did not fit is still counted under the replay.
    assert query(db, "SELECT SUM(calls) FROM gpu_kernels WHERE call_path = "
                     "'replay;cudaGraphLaunch'") == [((1 << 16) + 10,)]


def test_sonde_report_says_where_to_see_them(db):
    run_graphs(db, "graph_capture", str(REPLAYS))
    text = run([CLI, "report", db]).stdout
    assert f"CUDA graphs: {3 * REPLAYS + 2} replayed GPU records" in text
