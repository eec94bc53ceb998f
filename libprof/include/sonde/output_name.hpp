// Where a run's profile goes when the name asked for is taken: the root process claims the name
// with O_EXCL, and on EEXIST the next of these. `sonde run` walks the same list to name the file
// its run actually wrote.
#pragma once

#include <sys/types.h>

#include <string>

namespace sonde {

// Names tried after the one asked for.
inline constexpr int kOutputAlternatives = 16;

// n = 1: "dir/prof.<pid>.db", n > 1: "dir/prof.<pid>-<n>.db" (no extension: appended).
inline std::string alternative_output(const std::string& path, pid_t pid, int n) {
  std::string tag = "." + std::to_string(pid) + (n > 1 ? "-" + std::to_string(n) : "");
  size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash + 1))
    return path.substr(0, dot) + tag + path.substr(dot);
  return path + tag;
}

}  // namespace sonde
