"""sonde's PEP 517 build backend (pyproject.toml): `pip wheel .`, `python3 -m build --wheel`
and scripts/build-wheels.sh build a wheel for the interpreter that runs it, from the project's
own CMake build with SONDE_PORTABLE on (SQLite and fmt built in), every other library it needs
bundled (bundle.py) and checked against the manylinux list (elf_deps.py).

The build directory is build-wheel/ in the source tree (config setting `build-dir`, or
SONDE_WHEEL_BUILD_DIR); one build serves every interpreter: each adds itself to the
build's SONDE_EXTRA_PYTHONS and only its extension is compiled anew. An existing build keeps its
settings (scripts/test.sh's, tests included), and must be a portable one; config setting
`skip-build=1` packs what the build holds without running CMake."""
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from elf_deps import audit, fmt_version  # noqa: E402
from layout import SUMMARY, lay_out  # noqa: E402
from wheel_file import write_wheel  # noqa: E402

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "sonde"


def version():
    with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        return re.search(r"project\(sonde VERSION ([0-9.]+)", f.read()).group(1)


def _build_dir(config_settings):
    return os.path.abspath((config_settings or {}).get("build-dir")
                           or os.environ.get("SONDE_WHEEL_BUILD_DIR")
                           or os.path.join(SOURCE, "build-wheel"))


def _cache(build):
    """The build's CMakeCache.txt as {name: value}; None where it is not configured."""
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
            return dict(re.findall(r"^([A-Za-z_][\w-]*):\w+=(.*)$", f.read(), re.M))
    except OSError:
        return None


def _say(message):
    print(f"sonde wheel: {message}", file=sys.stderr, flush=True)


def _kit_setting():
    """-DSONDE_PORTABLE_KIT=... from scripts/portable-kit.sh (glibc 2.31 to link against), or
    nothing where it cannot be made (no apt, no network): the wheel then needs the build
    machine's glibc and libstdc++, and its tag says so."""
    r = subprocess.run([os.path.join(SOURCE, "scripts", "portable-kit.sh")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        _say("scripts/portable-kit.sh failed; this wheel will need this machine's glibc and "
             "libstdc++:\n" + r.stderr[-2000:])
        return []
    return ["-DSONDE_PORTABLE_KIT=" + r.stdout.strip()]


def cmake_build(build):
    """Configures (a new build, or adding this interpreter) and builds what the wheel holds."""
    cache = _cache(build)
    if cache is None:
        settings = ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DSONDE_PORTABLE=ON",
                    "-DSONDE_BUILD_TESTS=OFF"] + _kit_setting()
    elif cache.get("SONDE_PORTABLE", "").upper() not in ("ON", "1", "TRUE", "YES"):
        raise RuntimeError(f"{build} is not a portable build: configure it with "
                           f"-DSONDE_PORTABLE=ON, or name another build-dir")
    else:
        settings = []
    pythons = [p for p in (cache or {}).get("SONDE_EXTRA_PYTHONS", "").split(";") if p]
    if cache is None or sys.executable not in pythons:
        _say(f"configuring {build} (SONDE_PORTABLE=ON) for {sys.executable}")
        subprocess.run(["cmake", "-S", SOURCE, "-B", build, *settings,
                        "-DSONDE_EXTRA_PYTHONS=" + ";".join(pythons + [sys.executable])],
                       check=True, stdout=subprocess.DEVNULL)
    targets = subprocess.run(["cmake", "--build", build, "--target", "help"], check=True,
                             capture_output=True, text=True).stdout
    tag = "%d%d" % sys.version_info[:2]
    ext = f"sonde_python_ext_{tag}" if f"sonde_python_ext_{tag}:" in targets else "sonde_python_ext"
    wanted = ["sonde_preload", "sonde_cli", "sonde_view_server_cli", "sonde_viewer",
              "sonde_python_bytecode", ext]
    if "sonde_man:" in targets:
        wanted.append("sonde_man")
    subprocess.run(["cmake", "--build", build, "--target", *wanted], check=True)


def wheel_tag(needs):
    """cpXY-cpXY-manylinux_2_N_x86_64, N the highest glibc version the wheel's files ask for."""
    if sys.implementation.name != "cpython" or sysconfig.get_platform() != "linux-x86_64":
        raise RuntimeError(f"sonde's wheels are for CPython on x86-64 Linux, not "
                           f"{sys.implementation.name} on {sysconfig.get_platform()}")
    glibc = needs.get("GLIBC", (2, 17))
    py = "cp%d%d" % sys.version_info[:2]
    return f"{py}-{py}-manylinux_{glibc[0]}_{glibc[1]}_x86_64"


def metadata():
    return "\n".join([
        "Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version()}", f"Summary: {SUMMARY}",
        "Requires-Python: >=3.10, <3.14", "Classifier: Programming Language :: Python :: 3",
        "Classifier: Operating System :: POSIX :: Linux", "", ""])


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build = _build_dir(config_settings)
    if (config_settings or {}).get("skip-build") != "1":  # the tests: the build is theirs
        cmake_build(build)
    v = version()
    stage = os.path.join(build, "wheel-stage-%d%d" % sys.version_info[:2])
    dist_info, data = f"{NAME}-{v}.dist-info", f"{NAME}-{v}.data"
    bundled = lay_out(build, sysconfig.get_config_var("EXT_SUFFIX"), stage, data)
    _, problems, needs = audit(stage)
    if problems:
        raise RuntimeError("the wheel would need libraries it does not carry:\n  "
                           + "\n  ".join(problems))
    tag = wheel_tag(needs)
    os.makedirs(os.path.join(stage, dist_info))
    files = {"METADATA": metadata(),
             "WHEEL": f"Wheel-Version: 1.0\nGenerator: sonde_wheel\nRoot-Is-Purelib: false\n"
                      f"Tag: {tag}\n",
             "entry_points.txt": "[console_scripts]\nsonde = sonde._cli:main\n"}
    for name, text in files.items():
        with open(os.path.join(stage, dist_info, name), "w", encoding="utf-8") as f:
            f.write(text)
    name = f"{NAME}-{v}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    write_wheel(os.path.join(wheel_directory, name), stage, dist_info)
    _say(f"{name}: bundled {', '.join(bundled) or 'nothing'}; needs "
         + " ".join(f"{k}_{fmt_version(v)}" for k, v in sorted(needs.items())))
    return name


def get_requires_for_build_wheel(config_settings=None):
    return []  # CMake, a compiler and the -dev packages come from the machine (install-deps.sh)


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_sdist(sdist_directory, config_settings=None):
    """The files git tracks, under sonde-<version>/, with a PKG-INFO."""
    v = version()
    files = subprocess.run(["git", "-C", SOURCE, "ls-files", "-z"], check=True,
                           capture_output=True).stdout.decode().split("\0")
    name = f"{NAME}-{v}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as tar:
        for rel in filter(None, files):
            tar.add(os.path.join(SOURCE, rel), f"{NAME}-{v}/{rel}", recursive=False)
        info = tarfile.TarInfo(f"{NAME}-{v}/PKG-INFO")
        data = metadata().encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return name
