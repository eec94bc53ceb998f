"""The wheel's tree, from a portable build (SONDE_PORTABLE): the Python package with this
interpreter's extension, and beside it the kit (sonde/_kit: bin/sonde, bin/sonde-view-server,
lib/libsonde.so, share/) laid out as an install prefix, so the tool, the library and the
package find each other by the same relative paths as in the build and install trees."""
import glob
import os
import shutil

from bundle import bundle, strip

SUMMARY = ("Profiler for deep-learning workloads: Python frames, BLAS, oneDNN, CUDA, NCCL and MPI "
           "calls in one calling-context tree, in SQLite")


def _copy(src, dst, mode=0o644):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copyfile(src, dst)
    os.chmod(dst, mode)
    return dst


def package_files(build, ext_suffix, stage):
    """Copies the package (its modules, autostart/, this interpreter's _sonde) into stage/sonde;
    returns the extension's path there."""
    src = os.path.join(build, "python", "sonde")
    for path in glob.glob(os.path.join(src, "*.py")) + glob.glob(os.path.join(src, "autostart", "*.py")):
        _copy(path, os.path.join(stage, "sonde", os.path.relpath(path, src)))
    ext = os.path.join(src, "_sonde" + ext_suffix)
    if not os.path.exists(ext):
        raise RuntimeError(f"the build in {build} has no {os.path.basename(ext)}: configure it "
                           f"with this interpreter in SONDE_EXTRA_PYTHONS")
    return _copy(ext, os.path.join(stage, "sonde", os.path.basename(ext)), 0o755)


def kit_files(build, stage, data_dir):
    """The kit beside the package; returns its ELF files (to bundle and give RUNPATHs)."""
    kit = os.path.join(stage, "sonde", "_kit")
    elves = [_copy(os.path.join(build, "lib", "libsonde.so"), os.path.join(kit, "lib", "libsonde.so"), 0o755)]
    for prog in ("sonde", "sonde-view-server"):
        elves.append(_copy(os.path.join(build, "bin", prog), os.path.join(kit, "bin", prog), 0o755))
    viewer = os.path.join(build, "viewer", "dist")
    for name in ("index.html", "app.js", "app.css"):
        if not os.path.exists(os.path.join(viewer, name)):
            raise RuntimeError(f"the viewer is not built in {viewer} (node and npm are needed)")
        _copy(os.path.join(viewer, name), os.path.join(kit, "share", "sonde", "viewer", name))
    man = os.path.join(build, "packaging", "sonde.1")
    if os.path.exists(man):
        _copy(man, os.path.join(kit, "share", "man", "man1", "sonde.1"))
        # Also where pip puts a venv's man pages (<venv>/share/man), which `man sonde` reads.
        _copy(man, os.path.join(stage, data_dir, "data", "share", "man", "man1", "sonde.1"))
    return elves


def lay_out(build, ext_suffix, stage, data_dir):
    """The whole tree under stage; returns the sonames bundled."""
    if os.path.exists(stage):
        shutil.rmtree(stage)
    ext = package_files(build, ext_suffix, stage)
    elves = kit_files(build, stage, data_dir) + [ext]
    for path in elves:
        strip(path)
    return bundle(elves, os.path.join(stage, "sonde", "_kit", "lib"))
