"""Bundling for the wheel: each library a file needs beyond the manylinux list is copied into
the kit's lib/ (as auditwheel repair does), and every ELF gets a RUNPATH relative to itself
($ORIGIN), so the kit works wherever pip puts it and with no Debian library installed."""
import os
import re
import shutil
import subprocess

from elf_deps import ALLOWED, is_elf, needed


def _resolved(path):
    """{soname: path} as the loader of this machine resolves the file's dependencies."""
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    return dict(re.findall(r"^\s*(\S+) => (/\S+)", out, re.M))


def set_runpath(path, lib_dir):
    rel = os.path.relpath(lib_dir, os.path.dirname(path))
    origin = "$ORIGIN" if rel == "." else f"$ORIGIN/{rel}"
    subprocess.run(["patchelf", "--set-rpath", origin, path], check=True)


def strip(path):
    subprocess.run(["strip", "--strip-unneeded", path], check=True)


def bundle(files, lib_dir):
    """Copies into lib_dir what the ELF files (and, in turn, the copies) need beyond the
    manylinux list; gives each file a RUNPATH to lib_dir. Returns the sonames copied."""
    copied, todo = [], [f for f in files if is_elf(f)]
    while todo:
        path = todo.pop()
        missing = [d for d in needed(path) if d not in ALLOWED]
        if missing:
            where = _resolved(path)
            for soname in missing:
                target = os.path.join(lib_dir, soname)
                if os.path.exists(target):
                    continue
                if soname not in where:
                    raise RuntimeError(f"{path} needs {soname}, which this machine cannot find")
                shutil.copyfile(where[soname], target)
                os.chmod(target, 0o755)
                strip(target)
                copied.append(soname)
                todo.append(target)
        set_runpath(path, lib_dir)
    return copied
