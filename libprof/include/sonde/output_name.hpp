// Where a run's profile goes when the name asked for is taken: the root process claims the name
// (linking the blank profile in where no file has it, or O_EXCL), and on EEXIST the next of these.
// `sonde run` walks the same list to name the file its run actually wrote.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace sonde {

// The directory a profile's path names ("." for a bare name).
inline std::string output_dir(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

// The longest file name a profile may have in its directory: SQLite keeps `<name>-journal`
// beside it, and a name the directory holds whose journal it cannot (NAME_MAX, 255 here, less
// 8) left a profile with nothing in it, its flushes refused ("File name too long").
inline size_t longest_output_name(const std::string& path) {
  long max = ::pathconf(output_dir(path).c_str(), _PC_NAME_MAX);
  return (max > 8 ? size_t(max) : 255) - 8;
}

// The longest full path a profile may have: SQLite's unix VFS makes a file's full path in 512
// bytes (MAX_PATHNAME), its journal's "-journal" after it. A profile under a 616-byte working
// directory was lost ("unable to open database file"), and no reader could open one there.
inline constexpr size_t kLongestProfilePath = 500;

inline size_t output_name_length(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path.size() : path.size() - slash - 1;
}

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

namespace output_name_detail {

// "dir/prof.db" with `tag` before its extension: "dir/prof<tag>.db".
inline std::string tagged(const std::string& path, const std::string& tag) {
  size_t slash = path.rfind('/');
  size_t dot = path.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash + 1))
    return path.substr(0, dot) + tag + path.substr(dot);
  return path + tag;
}

// `path` without the first ".<word><digits>" part of its file's name (".rank3", ".launcher0":
// a tag, not the name's start), and with `beside`, the ".<pid>" or ".<pid>-<n>" of a name taken
// beside an earlier run's file (alternative_output) that follows it.
inline std::string untagged(const std::string& path, std::string_view word, bool beside = false) {
  size_t slash = path.rfind('/');
  size_t from = slash == std::string::npos ? 0 : slash + 1;
  std::string tag = "." + std::string(word);
  auto digits = [&](size_t at) {
    while (at < path.size() && path[at] >= '0' && path[at] <= '9') ++at;
    return at;
  };
  for (size_t at = path.find(tag, from); at != std::string::npos; at = path.find(tag, at + 1)) {
    size_t end = digits(at + tag.size());
    if (end == at + tag.size() || (end != path.size() && path[end] != '.') || at <= from) continue;
    if (beside && end + 1 < path.size()) {  // ".4242" or ".4242-2", then the extension or end
      size_t pid = digits(end + 1);
      if (pid > end + 1 && pid < path.size() && path[pid] == '-') pid = digits(pid + 1);
      std::string_view rest = std::string_view(path).substr(pid);  // "", or the extension
      if (pid > end + 1 && (rest.empty() || (rest[0] == '.' && rest.find('.', 1) == rest.npos)))
        end = pid;
    }
    return path.substr(0, at) + path.substr(end);
  }
  return path;
}

// The file's name holds `tag` followed by a dot or at its end.
inline bool has_tag(const std::string& path, const std::string& tag) {
  size_t slash = path.rfind('/');
  std::string file = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t at = file.find(tag + ".");
  return at != std::string::npos || (file.size() >= tag.size() &&
                                     file.compare(file.size() - tag.size(), tag.size(), tag) == 0);
}

}  // namespace output_name_detail

// The name asked for, where `path` is a launcher's (below): its ranks inherit the launcher's
// file name and name theirs from this. "dir/prof.launcher0.db" -> "dir/prof.db", and beside an
// earlier run's file "dir/prof.launcher0.<pid>.db" -> "dir/prof.db" too: each node's launcher
// has its own pid, and its ranks were named "prof.<pid>.rank<R>.db", a pid a node, which the
// merge's pattern missed (its ranks take their own names beside the earlier run's, each).
inline std::string launcher_base(const std::string& path) {
  return output_name_detail::untagged(path, "launcher", true);
}

// The file of a launcher of ranks that is itself task T of an outer job (torchrun under srun,
// mpirun in a SLURM batch step: sonde/rank_launcher.hpp): "dir/prof.db" -> "dir/prof.launcher0.db".
// The outer job's tasks never share one file, nor take a name its ranks write. A launcher under
// another's (srun in a batch script, torchrun under it) is named from the name asked for.
inline std::string launcher_output(const std::string& path, int task) {
  return output_name_detail::tagged(launcher_base(path), ".launcher" + std::to_string(task));
}

// A rank's own file beside the one asked for: "dir/prof.db" -> "dir/prof.rank3.db"; from a
// launcher's file, "dir/prof.launcher0.db" -> "dir/prof.rank3.db"; and from another rank's
// (a launcher not known as one, whose outer rank's file its ranks inherit),
// "dir/prof.rank1.db" -> "dir/prof.rank3.db": "prof.rank1.rank3.db" was found by no reader.
inline std::string rank_output(const std::string& path, int rank) {
  return output_name_detail::tagged(output_name_detail::untagged(launcher_base(path), "rank"),
                                    ".rank" + std::to_string(rank));
}

// The name is already rank R's own (inherited from the rank itself by its children).
inline bool is_rank_output(const std::string& path, int rank) {
  return output_name_detail::has_tag(path, ".rank" + std::to_string(rank));
}

// The name is already outer task T's launcher's own (its children's, an exec'd image's).
inline bool is_launcher_output(const std::string& path, int task) {
  return output_name_detail::has_tag(path, ".launcher" + std::to_string(task));
}

// The name is some rank's own: a process given it runs inside that rank (a helper it started).
inline bool is_any_rank_output(const std::string& path) {
  return output_name_detail::untagged(path, "rank") != path;
}

}  // namespace sonde
