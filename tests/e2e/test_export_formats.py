"""sonde export on real profiles: the Chrome trace with its call paths interned (checked against
what Perfetto's JSON importer reads), speedscope's own format (checked against speedscope's
published JSON schema, tests/e2e/data/speedscope-file-format-schema.json, copied from the
speedscope 1.25.0 npm package, MIT licence, and against the rules its importer enforces), the SVG
flame graph (parsed as XML, widths against the callpaths view) and the progress line."""
import functools
import http.server
import json
import os
import re
import pty
import shutil
import subprocess
import threading
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

import pytest

from conftest import BIN, CLI, MLP, clean_env, query, run

PY = "/usr/bin/python3"
PYTHONPATH = os.path.join(os.environ.get("SONDE_BUILD", ""), "python")
HERE = Path(__file__).parent
WORKLOAD = HERE / "programs" / "export_workload.py"
HOSTILE = "<img src=x onerror=alert(1)>"
SVG = "{http://www.w3.org/2000/svg}"


def sonde_py(db, script, *args, trace=False):
    env = clean_env(PYTHONPATH=PYTHONPATH, **({"SONDE_TRACE": "1"} if trace else {}))
    r = subprocess.run([PY, "-m", "sonde", "-o", str(db), str(script), *map(str, args)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return db


@pytest.fixture(scope="module")
def mlp_profile(tmp_path_factory):
    db = tmp_path_factory.mktemp("mlp") / "prof.db"
    r = run([CLI, "run", "-o", db, "--", MLP, "--steps", 20], OPENBLAS_NUM_THREADS=1)
    assert r.returncode == 0, r.stderr
    return db


@pytest.fixture(scope="module")
def mlp_trace(tmp_path_factory):
    db = tmp_path_factory.mktemp("mlptrace") / "trace.db"
    r = run([CLI, "run", "--trace", "-o", db, "--", MLP, "--steps", 20], OPENBLAS_NUM_THREADS=1)
    assert r.returncode == 0, r.stderr
    return db


@pytest.fixture(scope="module")
def py_profile(tmp_path_factory):
    return sonde_py(tmp_path_factory.mktemp("py") / "prof.db", WORKLOAD, 1000)


@pytest.fixture(scope="module")
def py_trace(tmp_path_factory):
    """Python frames as events: 120,000 calls of a small function (above the progress line's
    threshold of 100,000 units)."""
    return sonde_py(tmp_path_factory.mktemp("pytrace") / "trace.db", WORKLOAD, 120000, trace=True)


def export(db, fmt, out=None):
    args = [CLI, "export", db, "--format", fmt] + (["-o", out] if out else [])
    r = run(args)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # piped: no progress line
    return r.stdout


# --- chrome --------------------------------------------------------------------------------------

def check_perfetto_structure(text):
    """What Perfetto's JSON importer (src/trace_processor/importers/json/json_trace_tokenizer.cc)
    needs: an object starting with {" (its sniffer), traceEvents an array of objects each with a
    ph; X events with numeric ts and dur (microseconds), integer pid and tid; M events naming
    processes and threads in args.name. Top-level keys it does not know (stackFrames, otherData)
    it skips as whole JSON values, so they must be valid JSON; displayTimeUnit must be a string."""
    assert text.startswith('{"traceEvents":[')
    doc = json.loads(text)
    assert isinstance(doc["traceEvents"], list) and isinstance(doc["displayTimeUnit"], str)
    for e in doc["traceEvents"]:
        assert isinstance(e["ph"], str) and len(e["ph"]) == 1
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["dur"] >= 0 and isinstance(e["name"], str) and e["name"]
        else:
            assert e["ph"] == "M" and e["name"] in ("process_name", "thread_name",
                                                    "thread_sort_index")
    return doc


def sf_path(doc, sf):
    frames, path = doc["stackFrames"], []
    while sf is not None:
        frame = frames[str(sf)]
        path.append(frame["name"])
        sf = frame.get("parent")
    return ";".join(reversed(path))


def check_stack_frames(doc):
    """Chrome's stackFrames: string ids, each parent an earlier id (chrome://tracing builds
    parents first), and every event's sf one of them."""
    frames = doc["stackFrames"]
    for fid, frame in frames.items():
        assert set(frame) <= {"name", "category", "parent"} and frame["name"]
        if "parent" in frame:
            assert isinstance(frame["parent"], str) and int(frame["parent"]) < int(fid)
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for e in events:
        assert str(e["sf"]) in frames
        assert "args" not in e or "path" not in e["args"]  # the path is never repeated
    return events


def distinct_paths(db):
    return {p for (p,) in query(db, "SELECT path FROM callpaths")}


def test_chrome_trace_names_each_call_path_once(mlp_trace):
    """Trace mode: one X event per trace_events row, its sf the node's call path, each distinct
    path (parent frame, routine) once in stackFrames, shared by all events."""
    doc = check_perfetto_structure(export(mlp_trace, "chrome"))
    events = check_stack_frames(doc)
    assert len(events) == query(mlp_trace, "SELECT COUNT(*) FROM trace_events")[0][0]
    assert len(doc["stackFrames"]) == query(mlp_trace, "SELECT COUNT(*) FROM callpaths")[0][0]
    assert {sf_path(doc, e["sf"]) for e in events} <= distinct_paths(mlp_trace)
    assert not [e for e in doc["traceEvents"]
                if e["name"] == "process_name" and "aggregated" in e["args"]["name"]]
    # The slices nest as their paths say (what Perfetto shows without reading sf).
    by_thread = defaultdict(list)
    for e in events:
        by_thread[e["tid"]].append(e)
    for evs in by_thread.values():
        stack = []
        for e in evs:
            start, end = round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)
            while stack and stack[-1][0] <= start:
                stack.pop()
            assert not stack or end <= stack[-1][0]
            assert ";".join([s[1] for s in stack] + [e["name"]]) == sf_path(doc, e["sf"])
            stack.append((end, e["name"]))


def test_chrome_profile_layout_has_the_tree_once(mlp_profile):
    """Profile mode: the aggregated tree as a flame chart, one X event per node, each path once."""
    doc = check_perfetto_structure(export(mlp_profile, "chrome"))
    assert doc["otherData"]["sonde_layout"] == "aggregated call tree, not a timeline"
    # Said where Perfetto shows it too: each process's title (otherData it does not show).
    titles = [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]
    assert titles and all(t.endswith(" [aggregated call tree, not a timeline]") for t in titles)
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(events) == query(mlp_profile, "SELECT COUNT(*) FROM nodes")[0][0]
    paths = {sf_path(doc, e["sf"]) for e in events if "sf" in e}
    assert paths == distinct_paths(mlp_profile)
    assert len(doc["stackFrames"]) == len(paths)


def test_chrome_profile_layout_puts_an_execd_image_after_the_one_it_replaced(tmp_path):
    """An exec'd image keeps the pid and thread id of the one it replaced: both trees were laid
    out from 0 on one track, so the second's frames nested under the first's."""
    db = tmp_path / "exec.db"
    r = run(["/bin/sh", "-c", f"exec {BIN / 'known_time'} 1 20 5"], db=db)
    assert r.returncode == 0, r.stderr
    doc = check_perfetto_structure(export(db, "chrome"))
    [(pid,)] = query(db, "SELECT pid FROM processes WHERE origin = 'exec'")
    track = sorted(((e["ts"], -e["dur"]) for e in doc["traceEvents"]
                    if e["ph"] == "X" and e["pid"] == pid and e["tid"] == pid))
    # Two trees, the second starting where the first ended; every event inside one of them.
    ends, stack = [], []
    for ts, neg in track:
        while stack and ts >= stack[-1]:
            stack.pop()
        if not stack:
            ends.append((ts, ts - neg))
        stack.append(ts - neg)
    assert len(ends) == 2 and ends[1][0] >= ends[0][1], ends
    names = [e["args"]["name"] for e in doc["traceEvents"]
             if e.get("name") == "thread_name" and e["pid"] == pid]
    assert len(names) == 1, names
    # speedscope: a profile per busy thread of each image, the exec'd one named as the second.
    profiles = [p["name"] for p in json.loads(export(db, "speedscope"))["profiles"]
                if f"pid {pid}," in p["name"]]
    assert profiles == [f"known_time (pid {pid}, tid {pid}, image 2)"], profiles


def test_trace_events_of_frames_open_at_the_end_are_written(tmp_path):
    """Trace mode: frames still open at a process's last flush (os._exit inside main(), a fork
    child's inherited frames) had no event: work's events named <module>;main;work as their path
    with no <module> or main slice around them."""
    script = tmp_path / "ox.py"
    script.write_text("import os\n"
                      "def work(n): return sum(range(n))\n"
                      "def main():\n"
                      "    pid = os.fork()\n"
                      "    for _ in range(3): work(50000)\n"
                      "    if pid == 0: os._exit(0)\n"
                      "    os.waitpid(pid, 0)\n"
                      "    os._exit(0)\n"
                      "main()\n")
    db = sonde_py(tmp_path / "ox.db", script, trace=True)
    doc = check_perfetto_structure(export(db, "chrome"))
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    tracks = defaultdict(list)
    for e in events:
        tracks[(e["pid"], e["tid"])].append(e)
    assert len(tracks) == 2
    for track in tracks.values():
        names = [e["name"] for e in track]
        assert names.count("ox.py:2(work)") == 3, names
        assert names.count("ox.py:3(main)") == 1 and names.count("ox.py:1(<module>)") == 1, names
        # Each event lies inside an event of each frame its path names above it.
        for e in track:
            path = sf_path(doc, e["sf"]).split(";")
            for above in path[:-1]:
                assert any(o["name"] == above and o["ts"] <= e["ts"] and
                           e["ts"] + e["dur"] <= o["ts"] + o["dur"] + 0.002 for o in track), \
                    (e, above)


# --- speedscope ----------------------------------------------------------------------------------

def validate(value, schema, root, where="$"):
    """A JSON-schema check for the keywords speedscope's schema uses (draft-07: $ref, anyOf,
    const, enum, type, properties, required, items). Returns a list of errors."""
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return validate(value, target, root, where)
    if "anyOf" in schema:
        if all(validate(value, s, root, where) for s in schema["anyOf"]):
            return [f"{where}: matches none of anyOf"]
        return []
    types = {"object": dict, "array": list, "string": str, "number": (int, float)}
    if "type" in schema and (not isinstance(value, types[schema["type"]])
                             or isinstance(value, bool)):
        return [f"{where}: not a {schema['type']}"]
    if "const" in schema and value != schema["const"]:
        return [f"{where}: {value!r} is not {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} not in {schema['enum']}"]
    errors = []
    if isinstance(value, dict):
        errors += [f"{where}: {k} missing" for k in schema.get("required", []) if k not in value]
        for k, sub in schema.get("properties", {}).items():
            if k in value:
                errors += validate(value[k], sub, root, f"{where}.{k}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            errors += validate(item, schema["items"], root, f"{where}[{i}]")
            if errors:
                break
    return errors


def check_speedscope(doc):
    schema = json.loads((HERE / "data" / "speedscope-file-format-schema.json").read_text())
    assert validate(doc, schema, schema) == []
    # What speedscope's importer (src/lib/file-format.ts, profile builders) enforces beyond it.
    nframes = len(doc["shared"]["frames"])
    for p in doc["profiles"]:
        assert p["unit"] == "nanoseconds" and p["endValue"] >= p["startValue"]
        if p["type"] == "sampled":
            assert len(p["samples"]) == len(p["weights"])
            assert all(0 <= f < nframes for s in p["samples"] for f in s)
            assert all(w > 0 for w in p["weights"])
        else:
            stack, last = [], p["startValue"]
            for e in p["events"]:
                assert last <= e["at"] <= p["endValue"] and 0 <= e["frame"] < nframes
                last = e["at"]
                if e["type"] == "O":
                    stack.append(e["frame"])
                else:
                    assert stack.pop() == e["frame"]
            assert stack == []
    assert 0 <= doc["activeProfileIndex"] < len(doc["profiles"])


def test_speedscope_sampled_weights_are_each_threads_exclusive_time(py_profile):
    doc = json.loads(export(py_profile, "speedscope"))
    check_speedscope(doc)
    assert [p["type"] for p in doc["profiles"]] == ["sampled"] * len(doc["profiles"])
    # A busy thread's weights are its nodes' exclusive time, its root's (time in no measured
    # call) included: they add up to the thread's time.
    busy = query(py_profile, "SELECT t.tid, SUM(n.excl_ns) FROM nodes n JOIN threads t "
                             "USING (thread_id) GROUP BY t.thread_id "
                             "HAVING SUM(CASE WHEN n.depth > 0 THEN n.excl_ns END) > 0")
    assert sorted(sum(p["weights"]) for p in doc["profiles"]) == sorted(ns for _, ns in busy)
    names = [f["name"] for f in doc["shared"]["frames"]]
    assert any(HOSTILE in n for n in names)


def test_speedscope_evented_from_trace_events(mlp_trace):
    doc = json.loads(export(mlp_trace, "speedscope"))
    check_speedscope(doc)
    opens = sum(e["type"] == "O" for p in doc["profiles"] for e in p["events"])
    assert [p["type"] for p in doc["profiles"]] == ["evented"]
    assert opens == query(mlp_trace, "SELECT COUNT(*) FROM trace_events")[0][0]


def test_a_process_traced_off_is_its_call_tree_in_a_traced_files_exports(tmp_path):
    """A traced run whose child ran with SONDE_TRACE=0 (or a file merged from traced and
    untraced runs): the child has call paths and no trace events. Both exports showed it as
    an empty track, or not at all: now its aggregated tree, titled so, beside the timeline."""
    (tmp_path / "child.py").write_text(
        "def child_work(n):\n    return sum(i * i for i in range(n))\nchild_work(300000)\n")
    (tmp_path / "parent.py").write_text(
        "import os, subprocess, sys\n"
        "def work(n):\n    return sum(i * i for i in range(n))\n"
        "work(20000)\n"
        "subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), 'child.py')],\n"
        "               env=dict(os.environ, SONDE_TRACE='0'), check=True)\n")
    db = sonde_py(tmp_path / "mix.db", tmp_path / "parent.py", trace=True)
    events = dict(query(db, "SELECT p.pid, COUNT(e.thread_id) FROM processes p "
                            "JOIN threads t USING (process_id) "
                            "LEFT JOIN trace_events e USING (thread_id) GROUP BY p.pid"))
    assert len(events) == 2 and sorted(events.values())[0] == 0, events
    child = next(pid for pid, n in events.items() if n == 0)
    parent = next(pid for pid, n in events.items() if n > 0)

    doc = check_perfetto_structure(export(db, "chrome"))
    titles = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"]
              if e["name"] == "process_name"}
    assert "aggregated" in titles[child] and "aggregated" not in titles[parent], titles
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == child]
    assert any("child_work" in e["name"] for e in slices), slices
    # its tree once: one slice per node of the child (its thread's root the whole track)
    assert len(slices) == query(db, "SELECT COUNT(*) FROM nodes n JOIN threads t USING "
                                    "(thread_id) JOIN processes p USING (process_id) "
                                    "WHERE p.pid = ?", (child,))[0][0]
    assert str(child) in doc["otherData"]["sonde_untraced"]
    assert sum(e["ph"] == "X" and e["pid"] == parent for e in doc["traceEvents"]) == \
        events[parent]

    ss = json.loads(export(db, "speedscope"))
    check_speedscope(ss)
    kinds = {p["name"]: p["type"] for p in ss["profiles"]}
    assert [k for k, v in kinds.items() if v == "evented"] == [
        k for k in kinds if f"pid {parent}," in k], kinds
    untraced = [k for k in kinds if f"pid {child}," in k]
    assert len(untraced) == 1 and kinds[untraced[0]] == "sampled", kinds
    assert "aggregated call tree" in untraced[0]


def test_an_execd_image_traced_off_keeps_its_tree_after_the_timeline(tmp_path):
    """An image exec'd with SONDE_TRACE=0 shares its pid (and track) with the traced one it
    replaced: taken by pid as traced, its tree was left out of both exports (a review's find);
    by process, it is laid out after the timeline's events on that track."""
    (tmp_path / "child.py").write_text(
        "def cwork():\n    return sum(range(200000))\nfor _ in range(5): cwork()\n")
    (tmp_path / "parent.py").write_text(
        "import os, sys\n"
        "def pwork():\n    return sum(range(200000))\n"
        "for _ in range(5): pwork()\n"
        "os.execve(sys.executable, [sys.executable, os.path.join(os.path.dirname(__file__), "
        "'child.py')], dict(os.environ, SONDE_TRACE='0'))\n")
    db = sonde_py(tmp_path / "exec.db", tmp_path / "parent.py", trace=True)
    assert query(db, "SELECT COUNT(DISTINCT pid), COUNT(*) FROM processes") == [(1, 2)]
    doc = check_perfetto_structure(export(db, "chrome"))
    slices = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    child = [e for e in slices if "cwork" in e["name"]]
    traced_end = max(e["ts"] + e["dur"] for e in slices if "pwork" in e["name"])
    assert child and min(e["ts"] for e in child) >= traced_end, (child[:1], traced_end)
    assert "sonde_untraced" in doc["otherData"]
    ss = json.loads(export(db, "speedscope"))
    check_speedscope(ss)
    names = [p["name"] for p in ss["profiles"]]
    assert any("image 2" in n and "aggregated call tree" in n for n in names), names


SPEEDSCOPE_APP = HERE / "speedscope" / "node_modules" / "speedscope" / "dist" / "release"
CHROMIUM = shutil.which("chromium")


def speedscope_imports(files, tmp_path):
    """Opens each file in speedscope's own app (the npm package's build, in headless Chromium,
    served from 127.0.0.1) and returns what the page shows: its <title> and whether speedscope
    said it failed. The app reads the file with its importer (src/lib/file-format.ts)."""
    site = tmp_path / "site"
    shutil.copytree(SPEEDSCOPE_APP, site)
    for name, path in files.items():
        shutil.copy(path, site / name)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(site))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    shown = {}
    try:
        for name in files:
            r = subprocess.run([CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
                                f"--user-data-dir={tmp_path / 'chromium'}",
                                "--virtual-time-budget=20000", "--dump-dom",
                                f"{url}/index.html#profileURL={url}/{name}"],
                               capture_output=True, text=True, timeout=180)
            dom = r.stdout
            title = dom.split("<title>", 1)[1].split("</title>", 1)[0] if "<title>" in dom else ""
            shown[name] = (title, "Something went wrong" in dom, dom)
    finally:
        server.shutdown()
    return shown


@pytest.mark.skipif(CHROMIUM is None or not SPEEDSCOPE_APP.is_dir(),
                    reason="needs Debian's chromium and `npm ci` in tests/e2e/speedscope "
                           "(scripts/install-deps.sh)")
def test_speedscope_itself_opens_the_files(mlp_trace, py_profile, tmp_path):
    """speedscope 1.25.0 imports an evented (trace) and a sampled (profile) file and shows the
    busiest thread; a file with one close event removed is refused, so the check can fail."""
    assert (HERE / "data" / "speedscope-file-format-schema.json").read_bytes() == \
        (SPEEDSCOPE_APP / "file-format-schema.json").read_bytes()
    (tmp_path / "evented.json").write_text(export(mlp_trace, "speedscope"))
    (tmp_path / "sampled.json").write_text(export(py_profile, "speedscope"))
    broken = json.loads((tmp_path / "evented.json").read_text())
    events = broken["profiles"][0]["events"]
    events.remove(next(e for e in events if e["type"] == "C"))
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    shown = speedscope_imports({n: tmp_path / n for n in
                                ["evented.json", "sampled.json", "broken.json"]}, tmp_path)
    for name, db in [("evented.json", mlp_trace), ("sampled.json", py_profile)]:
        title, failed, dom = shown[name]
        assert title == f"{Path(db).name} - speedscope" and not failed, dom[-2000:]
        assert "(pid " in dom  # the active profile's name in the toolbar
    assert shown["broken.json"][1], shown["broken.json"][2][-2000:]


# --- svg -----------------------------------------------------------------------------------------

def frames_of(tree):
    """(path, width, x, element, its callees' elements) for each frame <g class="f">: each a
    <g> of its own, none nested, parents before their callees, one row (17 px) above them."""
    groups = tree.findall(f"{SVG}g")
    assert all(g.get("class") == "f" for g in groups) and groups
    assert not [g for g in groups if g.find(f"{SVG}g") is not None], "a frame holds another"
    root_y = float(groups[0].find(f"{SVG}rect").get("y"))
    stack, out = [], []  # stack: (level, path, kids)
    for g in groups:
        rect = g.find(f"{SVG}rect")
        level = round((root_y - float(rect.get("y"))) / 17)
        while stack and stack[-1][0] >= level:
            stack.pop()
        assert len(stack) == level, "a frame is not one row above its caller"
        path = (stack[-1][1] if stack else ()) + (g.find(f"{SVG}title").text.split("\n")[0],)
        kids = []
        if stack:
            stack[-1][2].append(g)
        stack.append((level, path, kids))
        out.append((path, float(rect.get("width")), float(rect.get("x")), g, kids))
    return out


def test_svg_flame_graph_widths_are_inclusive_time(py_profile, tmp_path):
    out = tmp_path / "flame.svg"
    export(py_profile, "svg", out)
    text = out.read_text()
    tree = ET.fromstring(text)  # well-formed XML
    assert tree.tag == f"{SVG}svg"
    assert not list(tree.iter(f"{SVG}script")) and "<img" not in text
    for el in tree.iter():
        assert not any(a.lower().startswith("on") for a in el.attrib)
    frames = frames_of(tree)
    total_w = frames[0][1]
    assert total_w == pytest.approx(1180)
    (busy_s,) = query(py_profile, "SELECT thread_s FROM run_totals")[0]
    incl, rows = defaultdict(float), defaultdict(int)
    for path, incl_s in query(py_profile, "SELECT path, incl_s FROM callpaths"):
        incl[path] += incl_s
        rows[path] += 1
    by_path = defaultdict(float)
    for path, width, _, _, _ in frames[1:]:
        by_path[";".join(path[1:])] += width
    for path, width in by_path.items():
        # Names have no control characters here, so the title is the name as recorded.
        expected = incl[path] / busy_s * total_w
        if rows[path] == 1:
            assert width == pytest.approx(expected, abs=0.002), path
        else:
            # Two routines of one display name (__init__.py:1(<module>) of two packages) are
            # two paths; one narrower than 0.3 px is not drawn.
            assert expected - 0.3 * rows[path] <= width <= expected + 0.002 * rows[path], path
    # Children side by side within their parent, their widths adding up to at most its width.
    for path, width, x, group, callees in frames:
        kids = [(float(g.find(f"{SVG}rect").get("x")), float(g.find(f"{SVG}rect").get("width")))
                for g in callees]
        assert sum(w for _, w in kids) <= width + 0.002 * (len(kids) + 1)
        assert all(x - 0.002 <= kx and kx + kw <= x + width + 0.002 * (len(kids) + 1)
                   for kx, kw in kids)
    hostile = [p for p, *_ in frames if HOSTILE in p[-1]]
    assert hostile, "the routine named like an HTML tag is drawn, as text"
    assert "&lt;img src=x onerror=alert(1)&gt;" in text


@pytest.mark.skipif(shutil.which("xmllint") is None,
                    reason="needs libxml2's xmllint (libxml2-utils, scripts/install-deps.sh)")
def test_svg_of_a_deep_recursion_is_read_by_libxml2(tmp_path):
    """Frames nested as the call tree: a 300-deep recursion's file was refused by libxml2's
    readers ("Excessive depth in document: 256", rsvg-convert and lxml among them)."""
    program = tmp_path / "deep.py"
    program.write_text("import sys\nsys.setrecursionlimit(5000)\n"
                       "def down(n):\n    return sum(i * i for i in range(20000)) if n == 0 "
                       "else down(n - 1)\n"
                       "for _ in range(3):\n    down(300)\n")
    db = sonde_py(tmp_path / "deep.db", program)
    out = tmp_path / "deep.svg"
    export(db, "svg", out)
    r = subprocess.run(["xmllint", "--noout", str(out)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    frames = frames_of(ET.fromstring(out.read_text()))
    assert max(len(path) for path, *_ in frames) > 300  # every level drawn


DIFF_PROGRAM = """
import sys
def spin(n):
    return sum(i * i for i in range(n))
def grows(n):
    return spin(n)
def shrinks(n):
    return spin(n)
def only_after(n):
    return spin(n)
after = sys.argv[1] == "after"
for _ in range(20):
    grows(60000 if after else 20000)
    shrinks(20000 if after else 60000)
    if after:
        only_after(20000)
"""


def test_svg_differential_flame_graph_colours_each_paths_change(tmp_path):
    """--baseline: widths from the profile exported, colour from the change of each path's share
    of the busy time (red grew, blue shrank, full red where the baseline had no such path), and
    each frame's title gives both shares as SQL has them."""
    program = tmp_path / "work.py"
    program.write_text(DIFF_PROGRAM)
    before = sonde_py(tmp_path / "before.db", program, "before")
    after = sonde_py(tmp_path / "after.db", program, "after")
    out = tmp_path / "diff.svg"
    r = run([CLI, "export", after, "--format", "svg", "--baseline", before, "-o", out])
    assert r.returncode == 0, r.stderr
    tree = ET.fromstring(out.read_text())
    frames = {path[-1].split("(")[-1].rstrip(")"): group for path, _, _, group, _ in frames_of(tree)
              if path[-1].endswith(("(grows)", "(shrinks)", "(only_after)"))}
    assert set(frames) == {"grows", "shrinks", "only_after"}

    def share(db, name):
        return query(db, "SELECT c.incl_s / t.thread_s FROM callpaths c, run_totals t "
                         "WHERE c.path LIKE ?", (f"%({name})",))[0][0]

    def hue_light(group):
        h, _, l = group.find(f"{SVG}rect").get("fill")[4:-1].split(",")
        return int(h), int(l.rstrip("%"))

    for name, hue in (("grows", 0), ("shrinks", 220)):
        was, now = share(before, name), share(after, name)
        assert (now > was) == (hue == 0), (name, was, now)
        h, light = hue_light(frames[name])
        assert h == hue and light < 90, (name, h, light)
        title = frames[name].find(f"{SVG}title").text
        assert f"share {100 * was:.2f} % -> {100 * now:.2f} %" in title, title
    assert hue_light(frames["only_after"]) == (0, 50)
    assert "not in the baseline" in frames["only_after"].find(f"{SVG}title").text
    widths = {n: float(g.find(f"{SVG}rect").get("width")) for n, g in frames.items()}
    assert widths["grows"] > widths["shrinks"]  # the after side's widths
    refused = run([CLI, "export", after, "--format", "folded", "--baseline", before])
    assert refused.returncode == 2 and "--baseline goes with --format svg" in refused.stderr


# --- progress ------------------------------------------------------------------------------------

def test_progress_on_a_terminal_quiet_when_piped(py_trace, tmp_path):
    """stderr a terminal: a progress line redrawn in place, ending at 100 %; piped: nothing. The
    file written is the same either way."""
    events = query(py_trace, "SELECT COUNT(*) FROM trace_events")[0][0]
    assert events >= 100000
    piped = run([CLI, "export", py_trace, "--format", "chrome", "-o", tmp_path / "piped.json"])
    assert piped.returncode == 0 and piped.stderr == ""
    master, slave = pty.openpty()
    proc = subprocess.Popen([CLI, "export", str(py_trace), "--format", "chrome", "-o",
                             str(tmp_path / "tty.json")], stdout=subprocess.DEVNULL,
                            stderr=slave, env=clean_env())
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.wait(timeout=120) == 0
    text = seen.decode()
    assert text.startswith("\rsonde export:") and f"100 % ({events} of {events} events)" in text
    assert text.endswith("\n") or text.endswith("\r\n")
    assert (tmp_path / "piped.json").read_bytes() == (tmp_path / "tty.json").read_bytes()


# --- the target: a 2-step PyTorch trace --------------------------------------------------

def have_torch():
    return subprocess.run([PY, "-c", "import torch"], capture_output=True).returncode == 0


@pytest.mark.skipif(not have_torch(), reason="Debian's python3-torch not installed")
def test_torch_trace_under_50_mb(tmp_path):
    """examples/torch_cnn, 2 steps in trace mode: 536 MB of Chrome trace when every event
    carried its path; the target is under 50 MB, each path once."""
    db = sonde_py(tmp_path / "torch.db", HERE.parent.parent / "examples" / "torch_cnn" / "train.py",
                  "--steps", 2, "--eval-every", 0, trace=True)
    out = tmp_path / "torch.json"
    export(db, "chrome", out)
    size = out.stat().st_size
    events = query(db, "SELECT COUNT(*) FROM trace_events")[0][0]
    assert size < 50e6, f"{size / 1e6:.1f} MB for {events} events"
    doc = check_perfetto_structure(out.read_text())
    assert len(check_stack_frames(doc)) == events


def test_samples_json_keeps_a_name_that_holds_a_semicolon_whole(tmp_path, mlp_profile):
    # The path was split on ';', the separator of its text: `semi;name.py:1(hot)` became two
    # frames. And a profile that was not sampled said "sampled": true.
    script = tmp_path / "semi;name.py"
    script.write_text("def hot(n):\n    s = 0\n    for i in range(n): s += i * i\n    return s\n"
                      "for _ in range(40): hot(100000)\n")
    db = tmp_path / "sampled.db"
    env = clean_env(PYTHONPATH=PYTHONPATH)
    r = subprocess.run([PY, "-m", "sonde", "--sample", "500", "-o", str(db), str(script)],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(run([CLI, "export", db, "--format", "samples"]).stdout)
    assert doc["sampled"] is True and doc["samples"] > 0
    paths = [p["path"] for p in doc["paths"] if p["path"]]
    assert ["semi;name.py:1(<module>)", "semi;name.py:1(hot)"] in paths, paths
    assert all(len(p) <= 2 for p in paths), paths
    plain = json.loads(run([CLI, "export", mlp_profile, "--format", "samples"]).stdout)
    assert plain["sampled"] is False and plain["samples"] == 0 and plain["paths"] == []
    # Folded samples of a run without them: one line saying so, not an empty flame graph.
    r = run([CLI, "export", mlp_profile, "--format", "folded", "--sampled"])
    assert r.returncode == 1 and r.stdout == "" and "holds no samples" in r.stderr, r.stderr
    # The same sampled rows in report's JSON, tree's (which had none while its text printed
    # them) and the viewer's report (which lacked them: a red-team find).
    sampled = json.loads(run([CLI, "report", db, "--format", "json"]).stdout)["sampled"]
    assert sampled and json.loads(run([CLI, "tree", db, "--format", "json"]).stdout)["sampled"] \
        == sampled
    html = tmp_path / "view.html"
    assert run([CLI, "view", db, "--html", html]).returncode == 0
    text = html.read_text()
    start = text.index('<script id="sonde-data" type="application/json">') + 48
    data = json.loads(text[start:text.index("</script>", start)])
    assert data["profiles"][0]["report"]["sampled"] == sampled


PSTATS_PROGRAM = """
import json

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def g(x):
    return sorted(x)

def main():
    for i in range(7):
        fib(8)
        g([3, 1, 2])
    json.dumps({"\\u00e9t\\u00e9": [1, 2]})

main()
"""


def profiled_and_exported(tmp_path, fmt):
    """PSTATS_PROGRAM under python3 -m sonde, exported in `fmt`: (script, profile, export)."""
    script = tmp_path / "prog.py"
    script.write_text(PSTATS_PROGRAM)
    db = sonde_py(tmp_path / "prof.db", script)
    out = tmp_path / f"prof.{fmt}"
    r = subprocess.run([CLI, "export", str(db), "--format", fmt, "-o", str(out)],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return script, db, out


def pstats_of(path):
    import pstats
    return pstats.Stats(str(path)).stats


def test_pstats_is_read_by_pythons_pstats_with_cprofiles_counts(tmp_path):
    """--format pstats: Python's own pstats module reads the file, and every Python function's
    calls, primitive calls and callers' call counts are cProfile's on the same program (the
    times differ: they are two runs). A terminal gets one line instead of binary."""
    script, db, out = profiled_and_exported(tmp_path, "pstats")
    ours = pstats_of(out)
    theirs_file = tmp_path / "cprofile.pstats"
    subprocess.run([PY, "-m", "cProfile", "-o", str(theirs_file), str(script)], check=True,
                   env=clean_env(), timeout=60)
    theirs = pstats_of(theirs_file)

    def functions(stats):
        return {k: v for k, v in stats.items() if k[0] == str(script)}
    mine, ref = functions(ours), functions(theirs)
    assert sorted(k[2] for k in mine) == ["<module>", "fib", "g", "main"]
    assert set(mine) == set(ref)
    for key, (cc, nc, tt, ct, callers) in mine.items():
        rcc, rnc, _, _, rcallers = ref[key]
        assert (cc, nc) == (rcc, rnc), key
        # A caller's tuple: (calls, primitive calls, tottime, cumtime), as cProfile's.
        assert {c: v[0] for c, v in callers.items() if c[0] == str(script)} == \
            {c: v[0] for c, v in rcallers.items() if c[0] == str(script)}, key
        for c, v in callers.items():
            if c[0] == str(script) and c != key:  # recursion apart (export_pstats.cpp)
                assert v[1] == rcallers[c][1], (key, c)
        assert 0 <= tt <= ct + 1e-9, key
    fib = next(v for k, v in mine.items() if k[2] == "fib")
    assert fib[:2] == (7, 7 * 67)  # fib(8) makes 67 calls, 7 of them outermost
    # Built-ins (recorded with --builtins) are keyed as cProfile keys them: ('~', 0, name).
    db2 = tmp_path / "builtins.db"
    subprocess.run([PY, "-m", "sonde", "-o", str(db2), "--builtins", str(script)], check=True,
                   env=clean_env(PYTHONPATH=PYTHONPATH), capture_output=True, timeout=60)
    out2 = tmp_path / "builtins.pstats"
    subprocess.run([CLI, "export", str(db2), "--format", "pstats", "-o", str(out2)], check=True,
                   env=clean_env(), timeout=60)
    sorted_key = ("~", 0, "<built-in builtins.sorted>")
    with_builtins = pstats_of(out2)
    assert with_builtins[sorted_key][:2] == (7, 7)
    g_key = next(k for k in with_builtins if k[2] == "g")
    assert with_builtins[sorted_key][4][g_key][:2] == (7, 7)
    # On a terminal: one line, nothing binary.
    r = subprocess.run(["script", "-qec", f"{CLI} export {db} --format pstats", "/dev/null"],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "give -o FILE" in r.stdout, r.stdout


def test_callgrind_is_read_by_callgrind_annotate(tmp_path):
    """--format callgrind: valgrind's own callgrind_annotate reads it; its total is the busy
    threads' measured time and each function's inclusive time (self plus calls) is the
    hotspots view's, recursion included (fib calls itself 462 times a run)."""
    annotate = shutil.which("callgrind_annotate")
    if annotate is None:
        pytest.skip("callgrind_annotate (valgrind) is not installed: scripts/install-deps.sh")
    _, db, out = profiled_and_exported(tmp_path, "callgrind")
    text = out.read_text()
    assert text.startswith("# callgrind format\n") and "events: ns\n" in text
    r = subprocess.run([annotate, "--inclusive=yes", "--threshold=100", str(out)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # "12,345 (67.89%)  file:function" rows, and the total first.
    rows = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S.*?):(\S+)(?: \[.*\])?$", line)
        if m:
            rows[(m.group(2), m.group(3))] = int(m.group(1).replace(",", ""))
    ((excl_ns,),) = query(db, "SELECT SUM(excl_ns) FROM nodes WHERE parent_id IS NOT NULL")
    total = re.search(r"^([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", r.stdout, re.M)
    assert total and abs(int(total.group(1).replace(",", "")) - excl_ns) <= 1000, r.stdout[:2000]
    hot = {name: incl for name, incl in query(db, "SELECT routine, incl_s FROM hotspots")}
    for fn in ("fib", "g", "main"):
        # A function may be listed under its file as given and as relative to the directory.
        ours = max(v for (f, n), v in rows.items() if n.endswith(f"({fn})"))
        key = next(k for k in hot if k.endswith(f"({fn})"))
        assert abs(ours - hot[key] * 1e9) <= 1000, (fn, ours, hot[key])


def test_callgrind_names_that_look_compressed_stay_apart(tmp_path):
    """A region named "(7)" beside a function: callgrind names are written compressed, "(id)
    name", so a name that starts like a compressed one is read as itself (written bare, "(7)"
    was read as name 7, and callgrind_annotate merged the region into the function)."""
    annotate = shutil.which("callgrind_annotate")
    if annotate is None:
        pytest.skip("callgrind_annotate (valgrind) is not installed: scripts/install-deps.sh")
    script = tmp_path / "prog.py"
    script.write_text("import sonde, time\n"
                      "def load_data():\n"
                      "    time.sleep(0.02)\n"
                      "with sonde.region('(7)'):\n"
                      "    time.sleep(0.03)\n"
                      "load_data()\n")
    db = sonde_py(tmp_path / "prof.db", script)
    out = tmp_path / "prof.callgrind"
    r = subprocess.run([CLI, "export", str(db), "--format", "callgrind", "-o", str(out)],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([annotate, "--threshold=100", str(out)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    functions = [line.split(":", 1)[1] for line in r.stdout.splitlines()
                 if re.match(r"\s*[\d,]+ \(\s*[\d.]+%\)\s+\S.*:", line)
                 and "PROGRAM TOTALS" not in line]
    assert "(7)" in functions and any(f.endswith("(load_data)") for f in functions), r.stdout


# --- pprof ---------------------------------------------------------------------------------------

def pprof_of(db, out):
    """`out` (sonde export --format pprof of `db`) checked as gzip by gzip itself, then decoded
    by protobuf's parser (pprof_proto.py): (profile, its strings, {routine_id: stack of
    routine ids, leaf first} per sample, in order)."""
    pprof_proto = pytest.importorskip(
        "pprof_proto", reason="python3-protobuf is not installed: scripts/install-deps.sh")
    subprocess.run(["gzip", "-t", str(out)], check=True)
    p = pprof_proto.read_profile(out)
    s = p.string_table
    assert s[0] == ""
    # Each Function is its routine, as the routines table names it: shown as sonde report
    # shows it, the recorded name as system name, its Python file or else its library.
    expected = {}
    for rid, name, kind, library, file, line in query(
            db, "SELECT routine_id, name, kind, library, file, line FROM routines"):
        expected[(f"{name} [{kind}]", name, file or library, line)] = rid
    functions = {}
    for f in p.function:
        key = (s[f.name], s[f.system_name], s[f.filename], f.start_line)
        assert key in expected, key
        assert f.id != 0 and f.id not in functions
        functions[f.id] = expected[key]
    locations = {}
    for loc in p.location:
        assert loc.id != 0 and loc.id not in locations and len(loc.line) == 1
        locations[loc.id] = functions[loc.line[0].function_id]
    stacks = [[locations[i] for i in sample.location_id] for sample in p.sample]
    return p, s, stacks


def merged_by_stack(stacks, samples, root):
    """Samples of one stack added up, as pprof does: {path_ids as callpaths writes them (root
    first, '/'-joined, the thread root left out): summed values}."""
    merged = defaultdict(lambda: [0] * len(samples[0].value))
    for stack, sample in zip(stacks, samples):
        assert stack[-1] == root and root not in stack[:-1], stack
        values = merged["/".join(str(r) for r in reversed(stack[:-1]))]
        for i, v in enumerate(sample.value):
            values[i] += v
    return {k: tuple(v) for k, v in merged.items()}


def check_pprof_against_views(db, p, stacks):
    """One sample per node of the busy and waiting threads; merged by stack, the callpaths
    view's rows and the hotspots view's root row; in all, the exclusive ns the 100 % counts (a
    waiting thread's root has none)."""
    # (The nodes inside the waits for work are in no sum: a main thread's Thread.join among
    # them, since 2026-12-07.)
    ((busy_nodes,),) = query(db, "SELECT COUNT(*) FROM counted_nodes JOIN thread_times "
                                 "USING (thread_id) WHERE busy OR waiting")
    assert len(p.sample) == busy_nodes
    ((root,),) = query(db, "SELECT routine_id FROM routines WHERE kind = 'root'")
    ours = merged_by_stack(stacks, p.sample, root)
    views = {ids: (calls, round(excl_s * 1e9)) for ids, calls, excl_s in
             query(db, "SELECT path_ids, calls, excl_s FROM callpaths")}
    ((root_calls, root_excl),) = query(db, "SELECT calls, excl_s FROM hotspots "
                                           "WHERE kind = 'root'")
    views[""] = (root_calls, round(root_excl * 1e9))
    assert {k: v[:2] for k, v in ours.items()} == views
    ((counted_ns,),) = query(db, "SELECT SUM(n.excl_ns) FROM counted_nodes n JOIN thread_times t "
                                 "USING (thread_id) WHERE t.busy OR "
                                 "(t.waiting AND n.parent_id IS NOT NULL)")
    assert sum(v[1] for v in ours.values()) == counted_ns


def test_pprof_is_profile_proto_with_the_callpaths_views_stacks(tmp_path):
    """--format pprof: a gzip file that protobuf decodes as profile.proto; one sample per node,
    leaf first down to the thread root, so that merged by stack (as pprof merges them) they are
    the callpaths view's paths with its calls and exclusive ns, and the roots' own samples the
    hotspots view's root row; the time adds up to the busy threads' exclusive time; and what
    pprof shows as a function's cumulative time (the samples whose stack holds it) is the
    hotspots view's inclusive time, recursion included."""
    _, db, out = profiled_and_exported(tmp_path, "pprof")
    p, s, stacks = pprof_of(db, out)
    assert [(s[t.type], s[t.unit]) for t in p.sample_type] == \
        [("calls", "count"), ("time", "nanoseconds")]  # no FLOPs in a Python program
    assert s[p.default_sample_type] == "time"
    assert (s[p.period_type.type], s[p.period_type.unit], p.period) == ("time", "nanoseconds", 1)
    ((started, wall_s),) = query(db, "SELECT (SELECT MIN(started_ns) FROM runs), wall_s "
                                     "FROM run_totals")
    assert p.time_nanos == started and abs(p.duration_nanos - wall_s * 1e9) <= 1
    assert len(p.mapping) == 0  # Python frames only: no library

    check_pprof_against_views(db, p, stacks)
    hot = {rid: incl_s for rid, incl_s in query(db, "SELECT routine_id, incl_s FROM hotspots")}
    names = {rid: name for rid, name in query(db, "SELECT routine_id, name FROM routines")}
    for fn in ("fib", "g", "main"):
        rid = next(r for r, name in names.items() if name.endswith(f"({fn})"))
        cum = sum(sample.value[1] for stack, sample in zip(stacks, p.sample) if rid in stack)
        assert abs(cum - hot[rid] * 1e9) <= len(stacks), (fn, cum, hot[rid])
    # Binary: a terminal gets one line instead.
    r = subprocess.run(["script", "-qec", f"{CLI} export {db} --format pprof", "/dev/null"],
                       env=clean_env(), capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "give -o FILE" in r.stdout, r.stdout


def test_pprof_of_threads_adds_up_to_the_merged_views(tmp_path):
    """Three threads running one function: its path is a sample per thread, which merged are
    the callpaths view's row; the roots of the busy threads are the hotspots view's root row."""
    script = tmp_path / "threads.py"
    script.write_text("import threading\n"
                      "def work(n):\n    return sum(i * i for i in range(n))\n"
                      "ts = [threading.Thread(target=work, args=(20000,)) for _ in range(3)]\n"
                      "for t in ts: t.start()\n"
                      "for t in ts: t.join()\n")
    db = sonde_py(tmp_path / "threads.db", script)
    out = tmp_path / "threads.pb.gz"
    export(db, "pprof", out)
    p, s, stacks = pprof_of(db, out)
    check_pprof_against_views(db, p, stacks)
    ((busy,),) = query(db, "SELECT COUNT(*) FROM thread_times WHERE busy")
    assert busy == 4  # the main thread and three workers
    names = {rid: name for rid, name in query(db, "SELECT routine_id, name FROM routines")}
    leaves = [names[stack[0]] for stack in stacks]
    assert sum(name.endswith("(work)") for name in leaves) == 3, leaves


def test_pprof_of_native_calls_has_their_libraries_and_flops(mlp_profile, tmp_path):
    """mlp_train's BLAS calls: a flops sample type, each path's FLOPs the callpaths view's and
    their sum the cost models' total; each library a Mapping pprof need not symbolize."""
    out = tmp_path / "mlp.pb.gz"
    export(mlp_profile, "pprof", out)
    p, s, stacks = pprof_of(mlp_profile, out)
    assert [(s[t.type], s[t.unit]) for t in p.sample_type] == \
        [("calls", "count"), ("time", "nanoseconds"), ("flops", "count")]
    ((root,),) = query(mlp_profile, "SELECT routine_id FROM routines WHERE kind = 'root'")
    flops = {k: v[2] for k, v in merged_by_stack(stacks, p.sample, root).items()}
    views = {ids: round(f) for ids, f in query(mlp_profile, "SELECT path_ids, flops FROM callpaths")}
    views[""] = 0
    assert flops == views
    ((total,),) = query(mlp_profile, "SELECT SUM(flops) FROM routine_totals")
    assert total > 0 and sum(flops.values()) == round(total)
    libraries = {lib for (lib,) in query(mlp_profile,
                                         "SELECT DISTINCT r.library FROM routines r JOIN nodes n "
                                         "USING (routine_id) WHERE r.library <> ''")}
    assert {s[m.filename] for m in p.mapping} == libraries and libraries
    assert all(m.id != 0 and m.has_functions for m in p.mapping)
    mapping = {m.id: s[m.filename] for m in p.mapping}
    function = {f.id: f for f in p.function}
    for loc in p.location:
        f = function[loc.line[0].function_id]
        if loc.mapping_id:
            assert mapping[loc.mapping_id] == s[f.filename]
