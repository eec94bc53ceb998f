"""scripts/check_layers.py: the analyzers' folders include only what their libraries link.

Run on this source tree (which must pass) and on copies of its analyzers/ with one layer broken
in each way the check exists to catch: an upward #include, a folder no target builds, a cycle.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(os.environ.get("SONDE_SOURCE", Path(__file__).resolve().parents[2]))
CHECK = SOURCE / "scripts" / "check_layers.py"


def check(root, *args):
    return subprocess.run([sys.executable, str(CHECK), "--root", str(root), *args],
                          capture_output=True, text=True, timeout=120)


def copy_tree(tmp_path):
    shutil.copytree(SOURCE / "analyzers", tmp_path / "analyzers")
    return tmp_path


def test_the_source_tree_keeps_its_layers():
    r = check(SOURCE)
    assert r.returncode == 0, r.stderr
    assert "include only the folders their libraries link" in r.stdout


def test_the_layers_read_from_cmake_run_in_data_flow_order():
    r = check(SOURCE, "--print")
    assert r.returncode == 0, r.stderr
    may = {line.split(":")[0]: set(line.split(": ", 1)[1].split(", "))
           for line in r.stdout.splitlines() if not line.startswith("check_layers")}
    assert may["base"] == {"(nothing)"}
    assert may["profile"] == {"base"}
    assert may["metrics"] == {"base", "profile"}
    assert "render" not in may["metrics"] and "render" not in may["advice"]
    assert "programs" not in may["export"] and "view" not in may["export"]
    assert {"render", "advice"} <= may["programs"] and "view" not in may["programs"]
    assert {"programs", "render"} <= may["view"]
    assert set(may) - {"cli"} <= may["cli"]


def test_an_upward_include_fails_with_its_file_and_line(tmp_path):
    root = copy_tree(tmp_path)
    source = root / "analyzers" / "metrics" / "noise.cpp"
    lines = source.read_text().splitlines(keepends=True)
    lines.insert(1, '#include "render/report.hpp"\n')
    source.write_text("".join(lines))
    r = check(root)
    assert r.returncode == 1
    assert ('analyzers/metrics/noise.cpp:2: includes "render/report.hpp", but analyzers/metrics/ '
            "does not link analyzers/render/") in r.stderr


def test_a_header_of_base_reaching_up_fails(tmp_path):
    root = copy_tree(tmp_path)
    header = root / "analyzers" / "base" / "table_format.hpp"
    header.write_text(header.read_text().replace(
        '#include "base/cell.hpp"', '#include "base/cell.hpp"\n#include "profile/profile_file.hpp"'))
    r = check(root)
    assert r.returncode == 1
    assert "analyzers/base/table_format.hpp" in r.stderr
    assert "does not link analyzers/profile/" in r.stderr


def test_a_declared_link_allows_the_include(tmp_path):
    root = copy_tree(tmp_path)
    source = root / "analyzers" / "metrics" / "noise.cpp"
    source.write_text('#include "render/report.hpp"\n' + source.read_text())
    cmake = root / "analyzers" / "CMakeLists.txt"
    text = cmake.read_text()
    # metrics linking render makes a cycle (render links advice, which links metrics): the
    # include is allowed, and the cycle is what fails.
    cmake.write_text(text.replace("target_link_libraries(sonde_metrics PUBLIC sonde_profile)",
                                  "target_link_libraries(sonde_metrics PUBLIC sonde_profile "
                                  "sonde_render)"))
    r = check(root)
    assert r.returncode == 1
    assert "noise.cpp" not in r.stderr
    assert "folders link each other in a cycle: advice -> metrics -> render -> advice" in r.stderr


def test_a_folder_no_target_builds_fails(tmp_path):
    root = copy_tree(tmp_path)
    (root / "analyzers" / "stray").mkdir()
    (root / "analyzers" / "stray" / "helper.cpp").write_text('#include "view/view_bundle.hpp"\n')
    r = check(root)
    assert r.returncode == 1
    assert "analyzers/stray/: no target in analyzers/CMakeLists.txt builds its sources" in r.stderr
