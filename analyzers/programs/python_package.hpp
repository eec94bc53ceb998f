// sonde's Python package beside a libsonde.so, for `sonde run --python`: the directory whose
// sonde/autostart starts the Python hook in every interpreter of the run (python3 -m sonde's
// children get it the same way).
#pragma once

#include <string>

namespace sonde::analyzers {

// The directory holding the `sonde` package of the same build or installation as `library`:
// <build>/python beside <build>/lib, <prefix>/lib/python3*/{dist,site}-packages beside
// <prefix>/lib, or a wheel's site-packages (<site>/sonde/_kit/lib). "" when none has
// sonde/autostart/sitecustomize.py.
std::string find_python_package(const std::string& library);

// PYTHONPATH for an interpreter of a run: the package's sonde/autostart, then the caller's own
// PYTHONPATH. The package's folder is not put there: the autostart sitecustomize appends it to
// sys.path behind everything else, so that it shadows no module of the user's or the stdlib's.
std::string autostart_python_path(const std::string& package);

}  // namespace sonde::analyzers
