"""The regression guard (run_benchmarks.py --compare, --record) on the real table of
docs/performance.md: it reads, its verdicts, its rewrite, and the whole path through the driver
with the real call-cost benchmark at the quick sizes, into a copy of the document."""
import os
import re
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("SONDE_SOURCE") or os.path.join(HERE, "..", "..")
DOC = os.path.join(SOURCE, "docs", "performance.md")
sys.path.insert(0, HERE)
import figures_table as ft  # noqa: E402
import run_benchmarks  # noqa: E402


def doc_text():
    with open(DOC) as f:
        return f.read()


def test_the_recorded_table_names_known_figures_in_their_units():
    rows = ft.read(doc_text())
    assert "call.added" in rows and rows["call.added"].target == ("<=", 20.0)
    for fid, row in rows.items():
        assert fid in run_benchmarks.FIGURES, f"{fid} is recorded but no benchmark measures it"
        assert row.unit == run_benchmarks.FIGURES[fid][1], fid
        assert set(run_benchmarks.GUARD) >= {run_benchmarks.FIGURES[fid][0]}, \
            f"{fid} is recorded but --compare does not run its benchmark"


def row(value, spread, target="<= 20"):
    return ft.Row(["x", str(value), "u", target, str(spread), "d", "c", "m"])


@pytest.mark.parametrize("values,expected", [
    ([25, 26, 27], "WORSE"),    # 6 above, spreads 1 and 1
    ([21.5, 22, 22.5], "same"),  # 2 above: within the recorded spread (2)
    ([15, 16, 17], "better"),
    ([22, 22.1, 29], "same"),    # 2.1 above, but this run spread 3.5
])
def test_a_figure_is_worse_only_beyond_the_larger_spread(values, expected):
    assert ft.verdict(row(20, 2), ft.Measured(values, "u")) == expected


def test_a_figure_whose_rounds_agree_is_not_flagged_for_its_last_digit():
    assert ft.verdict(row(6.9, 0), ft.Measured([7.0, 7.0], "MiB")) == "same"
    assert ft.verdict(row(6.9, 0), ft.Measured([7.2, 7.2], "MiB")) == "WORSE"


def test_targets_parse_and_refuse_prose():
    assert ft.parse_target("< 9.54", "f") == ("<", 9.54)
    assert ft.parse_target("-", "f") is None
    assert ft.meets(("<=", 20.0), 20.0) and not ft.meets(("<", 20.0), 20.0)
    with pytest.raises(ft.TableError):
        ft.parse_target("about 20", "f")


def test_a_malformed_table_is_refused():
    text = doc_text()
    with pytest.raises(ft.TableError):
        ft.read(text.replace("| figure | recorded | unit |", "| figure | value | unit |"))
    with pytest.raises(ft.TableError):
        ft.read(text.replace(ft.MARKER, "<!-- figures -->"))
    first = next(line for line in text.splitlines() if line.startswith("| call.added |"))
    with pytest.raises(ft.TableError):
        ft.read(text.replace(first, first + "\n" + first))


def test_record_rewrites_measured_rows_and_keeps_targets_and_the_rest():
    text = doc_text()
    measured = {"call.added": ft.Measured([18.0, 19.0, 20.0], "ns/call"),
                "python3.13.default": ft.Measured([0.4], "x cProfile")}
    new = ft.record(text, measured, "2030-01-02", "abc1234+", "Some CPU, 2 CPUs")
    rows = ft.read(new)
    assert rows["call.added"].cells == {
        "figure": "call.added", "recorded": "19", "unit": "ns/call", "target": "<= 20",
        "spread": "1", "date": "2030-01-02", "commit": "abc1234+", "machine": "Some CPU, 2 CPUs"}
    assert rows["python3.13.default"].target is None  # a new row: the target is for people
    assert list(rows)[-1] == "python3.13.default"
    old_lines = [line for line in text.splitlines() if not line.startswith("| call.added |")]
    new_lines = [line for line in new.splitlines() if not line.startswith("| call.added |")
                 and not line.startswith("| python3.13.default |")]
    assert old_lines == new_lines


def driver(tmp_path, *args):
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    cmd = [sys.executable, os.path.join(HERE, "run_benchmarks.py"), "--quick",
           "--work-dir", str(tmp_path / "work"), *args]
    if "SONDE_BUILD" not in env:
        cmd += ["--build-dir", os.path.join(SOURCE, "build")]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def set_row(path, fid, value, spread):
    text = path.read_text()
    text = re.sub(rf"^\| {re.escape(fid)} \| [^|]+ \|(.*?)\| [^|]+ \|( [^|]+ \| [^|]+ \| "
                  rf"[^|]+ \|)$", lambda m: f"| {fid} | {value} |{m.group(1)}| {spread} |"
                  f"{m.group(2)}", text, flags=re.M)
    path.write_text(text)


def test_the_driver_flags_a_regression_only_when_strict_and_records_into_a_copy(tmp_path):
    doc = tmp_path / "performance.md"
    shutil.copyfile(DOC, doc)
    set_row(doc, "call.added", "0.001", "0")  # anything measured is worse than this
    p = driver(tmp_path, "--only", "call.added", "--compare", "--doc", str(doc))
    assert p.returncode == 0, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("| call.added |"))
    assert "WORSE" in line and "0.001 ± 0" in line
    assert "| call.adaptive | not measured in this run |" in p.stdout  # --only kept one figure
    p = driver(tmp_path, "--only", "call.added", "--compare", "--strict", "--doc", str(doc))
    assert p.returncode == 3, p.stdout + p.stderr
    assert "worse than recorded: call.added" in p.stderr

    set_row(doc, "call.added", "1e6", "0")
    p = driver(tmp_path, "--only", "call.added", "--compare", "--strict", "--record",
               "--doc", str(doc))
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^\| call\.added \| .* \| better \|$", p.stdout, re.M)
    rows = ft.read(doc.read_text())
    assert 0 < rows["call.added"].value < 1e6
    assert rows["call.added"].target == ("<=", 20.0)
    assert re.fullmatch(r"\d{4}-\d\d-\d\d", rows["call.added"].cells["date"])
    assert re.fullmatch(r"[0-9a-f]{7,}\+?", rows["call.added"].cells["commit"])
    assert rows["call.adaptive"].cells == ft.read(doc_text())["call.adaptive"].cells


def test_quick_figures_are_never_recorded_into_the_document(tmp_path):
    p = driver(tmp_path, "--only", "call.added", "--record")
    assert p.returncode == 2 and "--quick" in p.stderr
