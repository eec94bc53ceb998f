"""What a wheel's ELF files need from the machine they run on, read with binutils' readelf.

A wheel may rely on the manylinux allow-list alone (glibc, libstdc++, libgcc_s); every other
library it needs must travel inside it. `python3 elf_deps.py DIR_OR_WHEEL` prints, for each ELF,
its NEEDED entries and the highest GLIBC_/GLIBCXX_/CXXABI_ versions it asks for, and exits 1 when
a NEEDED entry is neither on the list nor bundled in the wheel (auditwheel's check, which is not
reachable here)."""
import os
import re
import subprocess
import sys
import tempfile
import zipfile

# PEP 599's libraries that every manylinux system provides, with the loader itself.
ALLOWED = {
    "libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0", "libutil.so.1",
    "libresolv.so.2", "libnsl.so.1", "libstdc++.so.6", "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
}
_VERSIONED = re.compile(r"Name: (GLIBC|GLIBCXX|CXXABI)_([0-9.]+)")


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def _readelf(*args):
    return subprocess.run(["readelf", "--wide", *args], check=True, capture_output=True,
                          text=True).stdout


def needed(path):
    """The DT_NEEDED sonames of an ELF file, in order."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", _readelf("-d", path))


def runpath(path):
    m = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[([^\]]*)\]",
                  _readelf("-d", path))
    return m.group(1) if m else ""


def version_needs(path):
    """{'GLIBC': (2, 34), 'GLIBCXX': (3, 4, 30), ...}: the highest version of each that the file
    asks for."""
    best = {}
    for name, version in _VERSIONED.findall(_readelf("-V", path)):
        v = tuple(int(x) for x in version.split(".") if x)
        if v > best.get(name, ()):
            best[name] = v
    return best


def elves(root):
    """Every ELF file under root, as paths relative to it, sorted."""
    found = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path) and is_elf(path):
                found.append(os.path.relpath(path, root))
    return sorted(found)


def audit(root):
    """(rows, problems, needs): a row per ELF (path, NEEDED, version needs), the problems found
    (a library neither allowed nor bundled beside the file's RUNPATH), and the highest version
    of each symbol set over all files."""
    rows, problems, needs = [], [], {}
    files = elves(root)
    bundled = {os.path.basename(f) for f in files}
    for rel in files:
        path = os.path.join(root, rel)
        deps, versions = needed(path), version_needs(path)
        for name, v in versions.items():
            needs[name] = max(needs.get(name, ()), v)
        for dep in deps:
            if dep in ALLOWED:
                continue
            if dep not in bundled:
                problems.append(f"{rel}: needs {dep}, which is neither on the manylinux list "
                                f"nor in the wheel")
            elif "$ORIGIN" not in runpath(path):
                problems.append(f"{rel}: needs the bundled {dep} but has no $ORIGIN RUNPATH")
        rows.append((rel, deps, versions))
    return rows, problems, needs


def fmt_version(v):
    return ".".join(map(str, v))


def main(argv):
    if len(argv) != 2:
        print("usage: elf_deps.py DIR_OR_WHEEL", file=sys.stderr)
        return 2
    target = argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        root = target
        if os.path.isfile(target):
            zipfile.ZipFile(target).extractall(tmp)
            root = tmp
        rows, problems, needs = audit(root)
        for rel, deps, versions in rows:
            vs = " ".join(f"{k}_{fmt_version(v)}" for k, v in sorted(versions.items()))
            print(f"{rel}\n    NEEDED {' '.join(deps) or '-'}\n    highest {vs or '-'}")
        print("wheel needs: " + (" ".join(f"{k}_{fmt_version(v)}" for k, v in sorted(needs.items()))
                                 or "nothing versioned"))
        for p in problems:
            print(f"elf_deps: {p}", file=sys.stderr)
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
