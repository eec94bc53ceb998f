// Where this sonde executable lies: the build and install trees put what it needs (libsonde,
// the Python package, the viewer, sonde-view-server) at fixed places beside it.
#pragma once

#include <filesystem>

namespace sonde::analyzers {

// The directory of /proc/self/exe; throws Error when it cannot be read.
std::filesystem::path executable_dir();

}  // namespace sonde::analyzers
