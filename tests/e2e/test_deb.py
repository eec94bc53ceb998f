"""The .deb that `cpack -G DEB` makes from the build, held to Debian's policy by Debian's own
tools: lintian finds no error in it and no warning beyond those docs/install.md explains;
dpkg-deb reads its fields, contents and maintainer scripts; dpkg-parsechangelog its changelog.
test_install.py installs the same package into a fresh root and profiles from there."""
import gzip
import os
import re
import shutil
import subprocess

import pytest

BUILD = os.environ.get("SONDE_BUILD", "")
PYTHON_DIR = "usr/lib/sonde/python"


def sh(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120, **kw)
    assert r.returncode == 0, f"{cmd}: {r.stdout}{r.stderr}"
    return r


def explained_warnings():
    """The lintian tags docs/install.md ("The .deb and lintian") gives its reasons for, one
    bullet each: `tag`, `tag`: why."""
    with open(os.path.join(os.environ["SONDE_SOURCE"], "docs", "install.md")) as f:
        section = f.read().split("### The .deb and lintian", 1)[1].split("\n#", 1)[0]
    heads = re.findall(r"^- ((?:`[a-z0-9-]+`(?:, )?)+):", section, re.M)
    return {tag for head in heads for tag in re.findall(r"`([a-z0-9-]+)`", head)}


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    if not os.path.isdir(os.path.join(BUILD, "python", "sonde")):
        pytest.skip("the Python hook was not built (no Python development files)")
    out = tmp_path_factory.mktemp("cpack")
    sh(["cpack", "-G", "DEB", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-B", out])
    [deb] = out.glob("sonde_*.deb")
    return deb


@pytest.fixture(scope="module")
def contents(deb):
    """Path (without the leading ./) to the type letter and link target of each entry."""
    entries = {}
    for line in sh(["dpkg-deb", "-c", deb]).stdout.splitlines():
        mode, _owner, _size, _date, _time, rest = line.split(None, 5)
        path, _, target = rest.partition(" -> ")
        entries[path.removeprefix("./").rstrip("/")] = (mode[0], target)
    return entries


def test_lintian_finds_no_error_and_only_the_explained_warnings(deb):
    if not shutil.which("lintian"):
        pytest.skip("lintian is not installed (scripts/install-deps.sh installs it)")
    r = subprocess.run(["lintian", "--fail-on", "error", "--tag-display-limit", "0", str(deb)],
                       capture_output=True, text=True, timeout=120)
    tags = re.findall(r"^([EW]): sonde: (\S+)(.*)$", r.stdout, re.M)
    errors = [f"{tag}{rest}" for level, tag, rest in tags if level == "E"]
    assert r.returncode == 0 and not errors, r.stdout + r.stderr
    warnings = {tag for level, tag, _ in tags if level == "W"}
    explained = explained_warnings()
    assert explained, "docs/install.md lists no lintian warning"
    assert warnings <= explained, r.stdout


def test_control_fields_recommend_what_libsonde_opens(deb, tmp_path):
    fields = dict(re.findall(r"^(\S+): (.*)$", sh(["dpkg-deb", "-f", deb]).stdout, re.M))
    assert "@localhost" not in fields["Maintainer"] and re.search(r"<[^@>]+@[^>]+\.[a-z]+>$",
                                                                   fields["Maintainer"])
    # Depends from dpkg-shlibdeps (the libraries the programs link) beside python3: libstdc++6
    # where the build links it, libgcc-s1 alone where libstdc++ is built in (SONDE_PORTABLE_KIT,
    # as scripts/test.sh builds).
    depends = {d.split()[0] for d in fields["Depends"].split(", ")}
    with open(os.path.join(BUILD, "CMakeCache.txt"), encoding="utf-8") as f:
        kit = re.search(r"^SONDE_PORTABLE_KIT:\w+=(.+)$", f.read(), re.M)
    cxx = {"libgcc-s1"} if kit else {"libstdc++6"}
    assert {"python3", "libc6"} | cxx <= depends, fields["Depends"]
    assert kit is None or "libstdc++6" not in depends, fields["Depends"]
    # Each soname libsonde.so dlopens (PAPI's, libunwind's) is a file of a recommended package.
    sh(["dpkg-deb", "-x", deb, tmp_path])
    library = (tmp_path / "usr/lib/libsonde.so").read_bytes()
    sonames = set(re.findall(rb"lib(?:papi|unwind)\.so\.[0-9.]+", library))
    assert {s.split(b".")[0] for s in sonames} == {b"libpapi", b"libunwind"}, sonames
    recommends = [r.split()[0] for r in fields["Recommends"].split(", ")]
    for soname in sonames:
        owners = [p for p in recommends
                  if any(f.endswith("/" + soname.decode())
                         for f in sh(["dpkg-query", "-L", p]).stdout.splitlines())]
        assert owners, (soname, recommends)


def test_contents_hold_no_bytecode_and_only_compressed_pages(deb, contents, tmp_path):
    assert not [p for p in contents if "__pycache__" in p or p.endswith(".pyc")]
    assert f"{PYTHON_DIR}/sonde/__init__.py" in contents
    pages = [p for p, (kind, _) in contents.items()
             if p.startswith("usr/share/man/") and kind != "d"]
    assert "usr/share/man/man1/sonde.1.gz" in pages
    assert all(p.endswith(".gz") for p in pages), pages
    # sonde-view-server's page is sonde's, which says what that program is.
    assert contents["usr/share/man/man1/sonde-view-server.1.gz"] == ("l", "sonde.1.gz")
    sh(["dpkg-deb", "-x", deb, tmp_path])
    page = gzip.decompress((tmp_path / "usr/share/man/man1/sonde.1.gz").read_bytes()).decode()
    assert "sonde\\-view\\-server" in page or "sonde-view-server" in page
    doc = tmp_path / "usr/share/doc/sonde"
    assert (doc / "copyright").read_text().startswith(
        "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
    # gzip -9n: no file name and no time stamp in the header (RFC 1952: FLG bit 3, MTIME).
    for f in (doc / "changelog.gz", tmp_path / "usr/share/man/man1/sonde.1.gz"):
        head = f.read_bytes()[:10]
        assert head[:3] == b"\x1f\x8b\x08" and not head[3] & 0x08 and head[4:8] == b"\0\0\0\0", f
    (tmp_path / "changelog").write_bytes(gzip.decompress((doc / "changelog.gz").read_bytes()))
    version = sh(["dpkg-parsechangelog", "-l", tmp_path / "changelog", "-S", "Version"]).stdout
    assert version.strip() == sh(["dpkg-deb", "-f", deb, "Version"]).stdout.strip()


def test_maintainer_scripts_compile_and_remove_the_bytecode(deb, tmp_path):
    control, root = tmp_path / "DEBIAN", tmp_path / "root"
    sh(["dpkg-deb", "-e", deb, control])
    sh(["dpkg-deb", "-x", deb, root])
    # ldconfig through dpkg's trigger, never called by a script.
    assert "activate-noawait ldconfig" in (control / "triggers").read_text().splitlines()
    for script in ("postinst", "prerm", "postrm"):
        code = [l for l in (control / script).read_text().splitlines() if not l.startswith("#")]
        assert not [l for l in code if "ldconfig" in l], script
        assert os.access(control / script, os.X_OK)
    # The scripts name /usr; run here against the unpacked tree instead.
    for script in ("postinst", "prerm"):
        text = (control / script).read_text()
        assert f"/{PYTHON_DIR}" in text
        (tmp_path / script).write_text(text.replace(f"/{PYTHON_DIR}", str(root / PYTHON_DIR)))
    modules = sorted(p.relative_to(root) for p in (root / PYTHON_DIR).rglob("*.py"))
    assert modules
    sh(["sh", tmp_path / "postinst", "configure"], env={"PATH": "/usr/bin:/bin"})
    for module in modules:
        cached = list((root / module).parent.glob(f"__pycache__/{(root / module).stem}.*.pyc"))
        assert cached, module
    sh(["sh", tmp_path / "prerm", "remove"], env={"PATH": "/usr/bin:/bin"})
    assert not list((root / PYTHON_DIR).rglob("__pycache__"))
    assert sorted(p.relative_to(root) for p in (root / PYTHON_DIR).rglob("*.py")) == modules
