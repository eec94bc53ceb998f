"""Installing sonde: `cmake --install` into a prefix and the .deb from CPack unpacked into a fresh
root. Each tree works on its own, without the build tree: `sonde run` finds its libsonde.so
(also under /usr), `python3 -m sonde` its package through the .pth file, and a program built
against the installed region API (pkg-config or find_package(sonde)) records its regions."""
import gzip
import os
import subprocess
import textwrap
import urllib.request

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
REGIONS_C = """\
#include <sonde/sonde.h>
#include <stdio.h>
int main(void) {
  for (int i = 0; i < 3; ++i) {
    sonde_region_begin("step");
    sonde_region_end("step");
  }
  printf("active %d\\n", sonde_active());
  return 0;
}
"""
PY_VERSION = subprocess.run(["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                            capture_output=True, text=True).stdout.strip()


def sh(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
    return r


@pytest.fixture(scope="module")
def prefix(tmp_path_factory):
    if not os.path.isdir(os.path.join(BUILD, "python", "sonde")):
        pytest.skip("the Python hook was not built (no Python development files)")
    prefix = tmp_path_factory.mktemp("install")
    sh(["cmake", "--install", BUILD, "--prefix", prefix])
    return prefix


@pytest.fixture(scope="module")
def debroot(tmp_path_factory):
    if not os.path.isdir(os.path.join(BUILD, "python", "sonde")):
        pytest.skip("the Python hook was not built (no Python development files)")
    out = tmp_path_factory.mktemp("cpack")
    sh(["cpack", "-G", "DEB", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", out])
    [deb] = out.glob("sonde_*.deb")
    root = tmp_path_factory.mktemp("root")
    sh(["dpkg-deb", "-x", deb, root])
    return root


def profile_python(root_lib, tmp_path, pythonpath):
    """python3 -m sonde from an installed tree: the preload is that tree's libsonde.so."""
    script = tmp_path / "prog.py"
    script.write_text(PROGRAM)
    db = tmp_path / "prof.db"
    # LD_DEBUG=files names every library the interpreter loads.
    r = subprocess.run(["/usr/bin/python3", "-m", "sonde", "-o", str(db), str(script)],
                       env=clean_env(PYTHONPATH=pythonpath, LD_DEBUG="files", PATH="/usr/bin:/bin"),
                       capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(64.0 * 64 * 64)
    # In-process, the extension's RUNPATH ($ORIGIN/../../..) names it: paths normalised.
    # ("calling init": the object's constructor runs, once per object loaded.)
    loaded = {os.path.normpath(w.split("=", 1)[-1]) for l in r.stderr.splitlines()
              if "calling init:" in l for w in l.split() if w.endswith("libsonde.so") and "/" in w}
    assert loaded == {str(root_lib / "libsonde.so")}, loaded
    assert query(db, "SELECT pr.name FROM nodes n JOIN routines r USING (routine_id) "
                     "JOIN nodes p ON p.node_id = n.parent_id "
                     "JOIN routines pr ON pr.routine_id = p.routine_id "
                     "WHERE r.name = 'cblas_sgemm'") == [("prog.py:3(product)",)]
    return db


def test_installed_package_and_cli_work_without_the_build_tree(prefix, tmp_path):
    site = prefix / "lib" / f"python{PY_VERSION}" / "dist-packages"
    assert (site / "sonde.pth").read_text() == f"{prefix}/lib/sonde/python\n"
    # Python reads a .pth in its site directories (here one added as /usr/local's would be).
    found = sh(["/usr/bin/python3", "-c", f"import site; site.addsitedir({str(site)!r}); "
                "import sonde; print(sonde.__file__)"], env=clean_env())
    assert found.stdout.strip() == f"{prefix}/lib/sonde/python/sonde/__init__.py"
    db = profile_python(prefix / "lib", tmp_path, prefix / "lib" / "sonde" / "python")
    report = subprocess.run([str(prefix / "bin" / "sonde"), "report", str(db)],
                            capture_output=True, text=True, env=clean_env(), timeout=60)
    assert report.returncode == 0, report.stderr
    assert "cblas_sgemm" in report.stdout
    # sonde run --python (torchrun's route) finds the package in <libdir>/sonde/python: it said
    # "cannot find sonde's Python package beside .../lib/libsonde.so" (a red-team find).
    run_db = tmp_path / "run.db"
    run = subprocess.run([str(prefix / "bin" / "sonde"), "run", "--python", "-o", str(run_db),
                          "--", "/usr/bin/python3", str(tmp_path / "prog.py")],
                         capture_output=True, text=True, env=clean_env(), timeout=120,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert query(run_db, "SELECT COUNT(*) FROM routines WHERE name = 'prog.py:3(product)'") \
        == [(1,)]
    # sonde view serves through the installed sonde-view-server beside it (exec'd).
    view = subprocess.Popen([str(prefix / "bin" / "sonde"), "view", str(db)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=clean_env())
    try:
        url = view.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "token=" in url, view.stderr.read()
        with urllib.request.urlopen(url, timeout=30) as page:
            assert b"sonde view" in page.read()
    finally:
        view.terminate()
        assert view.wait(timeout=30) == 0


CHILDREN = """\
import subprocess, sys
r = subprocess.run([sys.executable, "-c", "print('child')"], capture_output=True, text=True)
print(r.stdout.strip(), repr(r.stderr))
"""


def test_an_install_under_a_path_with_spaces_profiles_its_children(tmp_path):
    # ld.so splits LD_PRELOAD at spaces: a venv in "dir with space/" gave every child
    # "ERROR: ld.so: object '/.../dir' from LD_PRELOAD cannot be preloaded", and `sonde run`
    # wrote no profile (a red-team find). Both launches now name libsonde through a link of
    # the user's own (sonde/preload_path.hpp), the same one.
    if not os.path.isdir(os.path.join(BUILD, "python", "sonde")):
        pytest.skip("the Python hook was not built (no Python development files)")
    spaced = tmp_path / "dir with space ü"
    sh(["cmake", "--install", BUILD, "--prefix", spaced])
    script = tmp_path / "children.py"
    script.write_text(CHILDREN)
    env = clean_env(PYTHONPATH=spaced / "lib" / "sonde" / "python", PATH="/usr/bin:/bin")
    db = tmp_path / "prof.db"
    for launch in (["/usr/bin/python3", "-m", "sonde", "-o", db, "--force", script],
                   [spaced / "bin" / "sonde", "run", "-o", db, "--force", "--",
                    "/usr/bin/python3", script]):
        r = subprocess.run([str(c) for c in launch], env=env, capture_output=True, text=True,
                           timeout=120, cwd=tmp_path)
        assert (r.returncode, r.stdout) == (0, "child ''\n"), (launch, r.stderr)
        assert "cannot be preloaded" not in r.stderr, r.stderr
        assert sorted(query(db, "SELECT origin FROM processes")) == [("child",), ("root",)], \
            launch


def test_programs_build_against_the_installed_region_api(prefix, tmp_path):
    (tmp_path / "regions.c").write_text(REGIONS_C)
    env = clean_env(PKG_CONFIG_PATH=prefix / "lib" / "pkgconfig")
    flags = sh(["pkg-config", "--cflags", "--libs", "sonde"], env=env).stdout.split()
    sh(["cc", "-o", tmp_path / "with_pc", tmp_path / "regions.c", *flags])
    (tmp_path / "CMakeLists.txt").write_text(textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.25)
        project(uses_sonde C)
        find_package(sonde 0.1 REQUIRED)
        add_executable(with_cmake regions.c)
        target_link_libraries(with_cmake PRIVATE sonde::api)
    """))
    sh(["cmake", "-S", tmp_path, "-B", tmp_path / "b", f"-DCMAKE_PREFIX_PATH={prefix}"], env=env)
    sh(["cmake", "--build", tmp_path / "b"], env=env)
    for exe in (tmp_path / "with_pc", tmp_path / "b" / "with_cmake"):
        assert sh([exe], env=env).stdout == "active 0\n"  # not under sonde: the stubs do nothing
        db = tmp_path / f"{exe.name}.db"
        r = sh([prefix / "bin" / "sonde", "run", "-o", db, "--", exe], env=env)
        assert r.stdout == "active 1\n"
        assert query(db, "SELECT n.calls FROM nodes n JOIN routines r USING (routine_id) "
                         "WHERE r.name = 'step' AND r.kind = 'region'") == [(3,)]


def test_the_deb_installs_into_a_fresh_root_and_profiles_from_there(debroot, tmp_path):
    usr = debroot / "usr"
    for f in ("bin/sonde", "lib/libsonde.so", "lib/libsonde_api.a", "include/sonde/sonde.h",
              "lib/pkgconfig/sonde.pc", "lib/cmake/sonde/sondeConfig.cmake",
              "share/bash-completion/completions/sonde"):
        assert (usr / f).exists(), f
    # Debian's python3 reads /usr/lib/python3/dist-packages, where the .pth names the package.
    assert (usr / "lib/python3/dist-packages/sonde.pth").read_text() == "/usr/lib/sonde/python\n"
    man = usr / "share/man/man1/sonde.1.gz"  # compressed, as Debian's policy asks
    if man.exists():  # help2man is optional at build time
        page = gzip.decompress(man.read_bytes()).decode()
        assert page.startswith('.\\" DO NOT MODIFY THIS FILE!')
        # Every subcommand's own options, the environment and the launcher, not only a list.
        for section in (".SS run", ".SS tune", ".SS view", "SONDE_SAMPLE_HZ", "SONDE_TORCH_THREADS",
                        "python3 -m sonde [options]"):
            assert section in page, section
        assert "--repeat" in page and "--stages" in page  # sonde tune's options
    # sonde run under <root>/usr finds <root>/usr/lib/libsonde.so, from any directory.
    blas = os.path.join(os.environ.get("SONDE_E2E_BIN", ""), "blas_threads")
    db = tmp_path / "native.db"
    r = subprocess.run([str(usr / "bin" / "sonde"), "run", "-o", "native.db", "--", blas, "2", "10"],
                       env=clean_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert query(db, "SELECT COUNT(*) FROM routines WHERE library != '' AND name LIKE 'cblas_%'")[0][0] > 0
    profile_python(usr / "lib", tmp_path, usr / "lib/sonde/python")


def test_the_site_directory_is_the_interpreters_own():
    """Where `cmake --install` puts sonde.pth is asked of the interpreter: for /usr and
    /usr/local, one of Debian's python3's own site directories (not a guess at its layout)."""
    source = os.environ["SONDE_SOURCE"]
    path = sh(["/usr/bin/python3", "-c",
               "import site; print('\\n'.join(site.getsitepackages()))"]).stdout.split()
    for prefix in ("/usr", "/usr/local"):
        rest = sh(["/usr/bin/python3", os.path.join(source, "python_hook/install/site_dir.py"),
                   prefix]).stdout.strip()
        assert f"{prefix}/{rest}" in path, (prefix, rest, path)
    # Another prefix: the interpreter's scheme there, in Debian's spelling.
    rest = sh(["/usr/bin/python3", os.path.join(source, "python_hook/install/site_dir.py"),
               "/opt/sonde"]).stdout.strip()
    assert rest == f"lib/python{PY_VERSION}/dist-packages"


def complete(words, cwd):
    """What bash's completion of `words` (the last one being typed) offers, with sonde.bash."""
    script = os.path.join(os.environ["SONDE_SOURCE"], "packaging", "sonde.bash")
    cli = os.environ["SONDE_CLI"]
    line = " ".join([os.path.abspath(cli)] + words)
    r = subprocess.run(["bash", "-c", f'source "{script}"; COMP_WORDS=({line}); '
                        f'COMP_CWORD={len(words)}; _sonde; printf "%s\\n" "${{COMPREPLY[@]}}"'],
                       capture_output=True, text=True, timeout=60, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return set(r.stdout.split())


def test_bash_completion_offers_subcommands_options_and_profiles(tmp_path):
    """The completion reads the tool's own --help: subcommands, then a subcommand's options,
    then profile files."""
    (tmp_path / "a.db").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert {"report", "tree", "run", "tune", "view"} <= complete(["t"], tmp_path) | complete([""], tmp_path)
    assert complete(["t"], tmp_path) == {"tree", "tune"}
    assert {"--repeat", "--stages"} <= complete(["tune", "--"], tmp_path)
    assert complete(["report", "--f"], tmp_path) == {"--format"}
    assert complete(["report", ""], tmp_path) == {"a.db"}
    # An option's values, from its help's set; any file for an output; nothing for a number.
    # (They were files: `export a.db --format <TAB>` offered a.db.)
    assert complete(["export", "a.db", "--format", ""], tmp_path) >= {"chrome", "pprof", "folded"}
    assert complete(["export", "a.db", "-f", "p"], tmp_path) == {"pprof", "pstats"}
    assert complete(["report", "--sort", "cum"], tmp_path) == {"cumtime", "cumulative"}
    assert complete(["export", "a.db", "-o", "n"], tmp_path) == {"notes.txt"}
    assert complete(["report", "--top", ""], tmp_path) == set()
    assert complete(["export", "--sampled", ""], tmp_path) == {"a.db"}  # a flag takes no value


def test_an_interpreter_the_install_has_no_extension_for_is_said_in_the_closing_lines(tmp_path):
    """`sonde run --python` under a CPython the install has no extension for: the child's own
    line goes to a terminal only (children of a run are quiet elsewhere), so a batch log read
    "profile written" alone; the launcher's closing lines now say which process ran without
    the hook and why (a red-team find of 2026-12-07). Here an install without Debian's 3.11
    extension: the build's libsonde and package, copied."""
    import shutil
    kit = tmp_path / "kit"
    (kit / "lib").mkdir(parents=True)
    shutil.copy(os.path.join(BUILD, "lib", "libsonde.so"), kit / "lib")
    shutil.copytree(os.path.join(BUILD, "python"), kit / "python")
    tag = "cpython-%s-x86_64-linux-gnu" % PY_VERSION.replace(".", "")
    os.unlink(kit / "python" / "sonde" / f"_sonde.{tag}.so")
    (tmp_path / "small.py").write_text("def f():\n    pass\nf()\nprint('ran')\n")
    r = subprocess.run([os.path.join(BUILD, "bin", "sonde"), "run", "--python", "-o",
                        tmp_path / "p.db", "--", "/usr/bin/python3", tmp_path / "small.py"],
                       env=clean_env(SONDE_LIBRARY=str(kit / "lib" / "libsonde.so")),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout == "ran\n", r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == f"sonde: profile written to {tmp_path / 'p.db'}", r.stderr
    assert lines[1].startswith("sonde: warning: the Python hook did not start in pid ") and \
        f"no extension for CPython {PY_VERSION}" in lines[1], r.stderr
    assert query(tmp_path / "p.db", "SELECT COUNT(*) FROM routines WHERE kind = 'python'") == \
        [(0,)]
