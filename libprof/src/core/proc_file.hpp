// A small file read whole with read(2): /proc's pseudo-files (cmdline, a thread's comm, the
// first CPU of cpuinfo). Not iostreams: a process's first ifstream initialises the locale and
// its facets, about 0.1 ms of every profiled process's start.
#pragma once

#include <cstddef>
#include <string>

namespace sonde {

// Up to `limit` bytes of `path` ("" where it cannot be opened). /proc formats a file as it is
// read, so a limit also spares the kernel the rest (cpuinfo's other CPUs).
std::string read_proc_file(const std::string& path, std::size_t limit = std::size_t(1) << 20);

}  // namespace sonde
