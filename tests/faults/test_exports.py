"""Exports of hostile and empty profiles: the SVG flame graph and speedscope's JSON stay well
formed whatever the names hold, and a profile with nothing measured still exports in every
format (each format's reader accepts it)."""
import json
import marshal
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import preloaded, prog, sonde

FORMATS = ["chrome", "speedscope", "svg", "folded", "csv", "pstats", "callgrind", "pprof"]


def read_pprof(path):
    """The e2e tests' profile.proto reader (tests/e2e/pprof_proto.py: python3-protobuf)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
    try:
        pprof_proto = pytest.importorskip(
            "pprof_proto", reason="python3-protobuf is not installed: scripts/install-deps.sh")
    finally:
        sys.path.pop(0)
    return pprof_proto.read_profile(path)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    db = str(tmp_path_factory.mktemp("exports") / "names.db")
    assert preloaded([prog("hostile_names")], db).rc == 0
    return db


def test_svg_with_hostile_names(hostile):
    """svg of names with invalid UTF-8, ';', a newline, ESC ]0; BEL, a tab, nothing: valid XML,
    every name shown as text, no control byte in the file"""
    r = sonde("export", hostile, "--format", "svg")
    assert r.rc == 0 and r.err == "", r.err
    root = ET.fromstring(r.out.encode())
    titles = [t.text.split("\n")[0] for t in root.iter("{http://www.w3.org/2000/svg}title")]
    for shown in ["bad\\xff\\xfe utf8", "semi;colon", "new\\nline", "<empty>",
                  "\\x1b]0;pwned\\x07title", "tab\\there"]:
        assert shown in titles, (shown, titles)
    assert not any(ord(c) < 0x20 and c not in "\n" for c in r.out)


def test_speedscope_with_hostile_names(hostile):
    """speedscope of the same names: valid JSON, invalid UTF-8 as U+FFFD, each name one frame"""
    r = sonde("export", hostile, "--format", "speedscope")
    assert r.rc == 0 and r.err == "", r.err
    doc = json.loads(r.out)
    names = [f["name"] for f in doc["shared"]["frames"]]
    for name in ["bad\ufffd\ufffd utf8", "semi;colon", "new\nline", "", "\x1b]0;pwned\x07title"]:
        assert name in names
    samples = doc["profiles"][0]["samples"]
    assert all(0 <= f < len(names) for s in samples for f in s)


def test_pstats_and_callgrind_with_hostile_names(hostile, tmp_path):
    """pstats and callgrind of the same names: pstats' strings load (invalid UTF-8 as U+FFFD),
    callgrind keeps one name a line (a newline or an escape shown as text)"""
    out = tmp_path / "names.pstats"
    r = sonde("export", hostile, "--format", "pstats", "-o", str(out))
    assert r.rc == 0 and r.err == "", r.err
    names = [k[2] for k in marshal.loads(out.read_bytes())]
    for name in ["bad\ufffd\ufffd utf8 [region]", "semi;colon [region]", "new\nline [region]"]:
        assert name in names, names
    r = sonde("export", hostile, "--format", "callgrind")
    assert r.rc == 0 and r.err == "", r.err
    # Each function by its compressed name, "(id) name" where first given.
    fns = [line[3:].split(" ", 1)[1] for line in r.out.splitlines()
           if line.startswith("fn=") and " " in line]
    for shown in ["bad\\xff\\xfe utf8", "new\\nline", "\\x1b]0;pwned\\x07title"]:
        assert shown in fns, fns
    assert not any(ord(c) < 0x20 and c != "\n" for c in r.out)


def test_pprof_with_hostile_names(hostile, tmp_path):
    """pprof of the same names: protobuf's parser, which refuses a proto3 string that is not
    UTF-8, reads the file; invalid UTF-8 is U+FFFD, the rest of each name kept as it was"""
    out = tmp_path / "names.pb.gz"
    r = sonde("export", hostile, "--format", "pprof", "-o", str(out))
    assert r.rc == 0 and r.err == "", r.err
    p = read_pprof(out)
    names = [p.string_table[f.name] for f in p.function]
    for name in ["bad\ufffd\ufffd utf8 [region]", "semi;colon [region]", "new\nline [region]",
                 " [region]", "\x1b]0;pwned\x07title [region]"]:
        assert name in names, names


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_of_a_profile_with_nothing_measured(fmt, tmp_path):
    """a program that makes no call sonde sees (/bin/true): every export format succeeds and
    its reader accepts the result"""
    db = str(tmp_path / "empty.db")
    assert preloaded(["/bin/true"], db).rc == 0
    out = tmp_path / "out"
    r = sonde("export", db, "--format", fmt, "-o", str(out))
    assert r.rc == 0 and r.err == "", r.err
    r.out = out.read_bytes().decode("utf-8", "replace")
    if fmt == "pstats":
        assert marshal.loads(out.read_bytes()) == {}
    elif fmt == "callgrind" and shutil.which("callgrind_annotate"):
        subprocess.run(["callgrind_annotate", str(out)], check=True, capture_output=True)
    elif fmt == "pprof":
        subprocess.run(["gzip", "-t", str(out)], check=True)
        p = read_pprof(out)
        assert p.string_table[0] == "" and len(p.sample) == 0 and len(p.sample_type) == 2
    if fmt == "chrome":
        assert json.loads(r.out)["stackFrames"] == {}
    elif fmt == "speedscope":
        assert len(json.loads(r.out)["profiles"]) == 1  # speedscope refuses a file with none
    elif fmt == "svg":
        ET.fromstring(r.out.encode())
