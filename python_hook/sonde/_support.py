"""Whether this interpreter can run sonde: CPython on x86-64 Linux with the extension built for
its version beside this package. Asked before anything starts, so that an interpreter without
one hears why in one line instead of an ImportError from deep inside the launched run."""
import importlib.machinery
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def supported_pythons():
    """The CPython versions whose extension this install holds, as '3.11' strings."""
    import glob
    import re
    found = set()
    for path in glob.glob(os.path.join(_HERE, "_sonde.cpython-*.so")):
        m = re.match(r"_sonde\.cpython-3(\d+)", os.path.basename(path))
        if m:
            found.add(int(m.group(1)))
    return [f"3.{minor}" for minor in sorted(found)]


def _has_extension():
    return any(os.path.exists(os.path.join(_HERE, "_sonde" + suffix))
               for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def unsupported():
    """None where sonde can run here, else the one line that says why and what to do."""
    machine = os.uname().machine
    this = f"{sys.implementation.name} {'.'.join(map(str, sys.version_info[:3]))} on {sys.platform}/{machine}"
    if sys.platform != "linux" or machine != "x86_64" or sys.implementation.name != "cpython":
        return f"sonde runs on CPython for x86-64 Linux; this is {this}"
    if _has_extension():
        return None
    have = supported_pythons()
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if not (3, 10) <= sys.version_info[:2] <= (3, 13):  # what the hook is built and tested for
        return (f"sonde supports CPython 3.10 to 3.13, not {version}; run one of those "
                f"(this install has an extension for {', '.join(have) or 'none'})")
    tag = "cp3%d" % sys.version_info[1]
    return (f"this sonde install has no extension for CPython {version} (it supports CPython "
            f"{', '.join(have) or 'none'}): install the sonde wheel built for {tag} "
            f"(scripts/build-wheels.sh builds one for each CPython 3.10-3.13 on a machine), or "
            f"run a supported interpreter")
