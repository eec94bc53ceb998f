"""`cmake --install`: the installed tree works on its own, without the build tree. The Python
package finds libsonde.so beside it (<prefix>/lib), and the installed `sonde` reads the
profile it wrote, with a GEMM under the Python function that called it."""
import os
import subprocess

import pytest

from conftest import clean_env, query

BUILD = os.environ.get("SONDE_BUILD", "")
PROGRAM = """\
import numpy
x = numpy.ones((64, 64), dtype=numpy.float32)
def product():
    return x.dot(x)
print(product().sum())
"""


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not os.path.isdir(os.path.join(BUILD, "python", "sonde")):
        pytest.skip("the Python hook was not built (no Python development files)")
    prefix = tmp_path_factory.mktemp("install")
    r = subprocess.run(["cmake", "--install", BUILD, "--prefix", str(prefix)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return prefix


def test_installed_package_and_cli_work_without_the_build_tree(prefix, tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    db = tmp_path / "prof.db"
    package_dir = prefix / "lib" / "python3" / "dist-packages"
    assert (package_dir / "sonde" / "__main__.py").exists()
    assert (prefix / "lib" / "libsonde.so").exists()
    # LD_DEBUG=files names every library the re-executed interpreter loads: the preload must
    # be the installed libsonde.so, not the build tree's.
    r = subprocess.run(["/usr/bin/python3", "-m", "sonde", "-o", str(db), str(script)],
                       env=clean_env(PYTHONPATH=str(package_dir), LD_DEBUG="files"),
                       capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(64.0 * 64 * 64)
    loaded = [l for l in r.stderr.splitlines() if "file=" in l and "libsonde.so" in l]
    assert loaded and all(str(prefix / "lib" / "libsonde.so") in l for l in loaded), loaded
    assert query(db, "SELECT pr.name FROM nodes n JOIN routines r USING (routine_id) "
                     "JOIN nodes p ON p.node_id = n.parent_id "
                     "JOIN routines pr ON pr.routine_id = p.routine_id "
                     "WHERE r.name = 'cblas_sgemm'") == [("prog.py:3(product)",)]
    report = subprocess.run([str(prefix / "bin" / "sonde"), "report", str(db)],
                            capture_output=True, text=True, env=clean_env(), timeout=60)
    assert report.returncode == 0, report.stderr
    assert "cblas_sgemm" in report.stdout
