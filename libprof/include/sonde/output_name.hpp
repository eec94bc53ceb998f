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

// A rank's own file beside the one asked for: "dir/prof.db" -> "dir/prof.rank3.db".
inline std::string rank_output(const std::string& path, int rank) {
  std::string tag = ".rank" + std::to_string(rank);
  size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash + 1))
    return path.substr(0, dot) + tag + path.substr(dot);
  return path + tag;
}

// The name is already rank R's own (inherited from the rank itself by its children).
inline bool is_rank_output(const std::string& path, int rank) {
  std::string tag = ".rank" + std::to_string(rank);
  size_t slash = path.rfind('/');
  std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t at = file.find(tag + ".");
  return at != std::string::npos || (file.size() >= tag.size() &&
                                     file.compare(file.size() - tag.size(), tag.size(), tag) == 0);
}

}  // namespace sonde
