"""Exports of hostile and empty profiles: the SVG flame graph and speedscope's JSON stay well
formed whatever the names hold, and a profile with nothing measured still exports in every
format (each format's reader accepts it)."""
import json
import xml.etree.ElementTree as ET

import pytest

from conftest import CLI, clean_env, preloaded, prog, run

FORMATS = ["chrome", "speedscope", "svg", "folded", "csv"]


def sonde(*args):
    return run([CLI, *args], env=clean_env())


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


@pytest.mark.parametrize("fmt", FORMATS)
def test_export_of_a_profile_with_nothing_measured(fmt, tmp_path):
    """a program that makes no call sonde sees (/bin/true): every export format succeeds and
    its reader accepts the result"""
    db = str(tmp_path / "empty.db")
    assert preloaded(["/bin/true"], db).rc == 0
    r = sonde("export", db, "--format", fmt)
    assert r.rc == 0 and r.err == "", r.err
    if fmt == "chrome":
        assert json.loads(r.out)["stackFrames"] == {}
    elif fmt == "speedscope":
        assert len(json.loads(r.out)["profiles"]) == 1  # speedscope refuses a file with none
    elif fmt == "svg":
        ET.fromstring(r.out.encode())
