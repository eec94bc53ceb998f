"""Prints where, relative to PREFIX, this interpreter looks for the prefix's packages: the
site directory of its own (site.getsitepackages(), which lists them whether or not they exist
yet) that is PREFIX/lib.../site-packages or dist-packages (Debian's python3:
lib/python3/dist-packages under /usr, lib/python3.X/dist-packages under /usr/local), else what
its installation scheme would use there. Run by `cmake --install` (python_hook/CMakeLists.txt),
which decides the prefix after configuring."""
import site
import sys
import sysconfig

prefix = sys.argv[1].rstrip("/")
for path in site.getsitepackages() + sys.path:
    rest = path[len(prefix) + 1:] if path.startswith(prefix + "/") else ""
    # Under /usr, /usr/local/lib/... is another prefix's.
    if rest.startswith("lib") and rest.rstrip("/").endswith(("site-packages", "dist-packages")):
        print(rest.rstrip("/"))
        break
else:
    debian = any(p.endswith("dist-packages") for p in sys.path)
    scheme_path = sysconfig.get_path("purelib", "posix_prefix",
                                     vars={"base": prefix, "platbase": prefix})
    rest = scheme_path[len(prefix) + 1:] if scheme_path.startswith(prefix + "/") else \
        "lib/python%d.%d/site-packages" % sys.version_info[:2]
    print(rest.replace("site-packages", "dist-packages") if debian else rest)
