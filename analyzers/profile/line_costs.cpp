#include "profile/line_costs.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <tuple>
#include <unordered_map>

#include "sonde/source_fingerprint.hpp"

namespace sonde::analyzers {
namespace {

// The lines of a source file, or none when it cannot be read (moved, another machine).
std::vector<std::string> read_source_lines(const std::string& path) {
  std::vector<std::string> lines;
  if (path.empty()) return lines;
  std::ifstream in(path, std::ios::binary);
  if (!in) return lines;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

bool glob_matches(const std::string& pattern, const std::string& text) {
  return ::fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace

std::string function_part(std::string_view name) {
  if (name.size() >= 2 && name.back() == ')') {
    auto open = name.rfind('(');
    if (open != std::string_view::npos)
      return std::string(name.substr(open + 1, name.size() - open - 2));
  }
  return std::string(name);
}

bool line_pattern_matches(std::string_view routine_name, std::string_view pattern) {
  if (pattern.empty()) return true;
  std::string p(pattern);
  return glob_matches(p, function_part(routine_name)) || glob_matches(p, std::string(routine_name));
}

LineCosts compute_line_costs(const ProfileFile& file, std::string_view pattern) {
  auto none = [&] {
    // A run with --lines whose patterns matched nothing says so in its notes (topic `lines`):
    // that, not the advice to use --lines, which the run did.
    std::vector<std::string> unmatched;
    if (file.has_table("notes")) {
      auto st = file.prepare("SELECT DISTINCT message FROM notes WHERE topic = 'lines'");
      while (st.step()) unmatched.push_back(st.text(0));
    }
    if (!unmatched.empty())
      return Error(fmt::format("no line costs in {}: {}", file.path(), fmt::join(unmatched, "; ")));
    return Error(
        fmt::format("no line costs in {}: run python3 -m sonde --lines PATTERN "
                    "SCRIPT [ARGS...] to record them",
                    file.path()));
  };
  if (!file.has_table("line_costs")) throw none();
  // Merged by name, file and first line rather than routine_id: the same function seen by two
  // processes is one table for the reader.
  using Key = std::tuple<std::string, std::string, std::int64_t>;
  struct Sums {
    std::int64_t hits = 0, time_ns = 0;
  };
  std::map<Key, std::map<std::int64_t, Sums>> by_function;
  bool any = false;
  {
    auto st = file.prepare(
        "SELECT r.name, r.file, r.line, c.line, SUM(c.hits), SUM(c.time_ns) "
        "FROM line_costs c JOIN routines r USING (routine_id) "
        "GROUP BY r.name, r.file, r.line, c.line");
    while (st.step()) {
      any = true;
      std::string name = st.text(0);
      if (!line_pattern_matches(name, pattern)) continue;
      Sums& s = by_function[{name, st.text(1), st.int64(2)}][st.int64(3)];
      s.hits += st.int64(4);
      s.time_ns += st.int64(5);
    }
  }
  if (!any) throw none();
  if (by_function.empty()) {
    std::vector<std::string> names;
    auto st = file.prepare(
        "SELECT DISTINCT r.name FROM line_costs c JOIN routines r "
        "USING (routine_id) ORDER BY r.name");
    while (st.step()) names.push_back(function_part(st.text(0)));
    throw Error(fmt::format("no function with line costs in {} matches '{}' (recorded: {})",
                            file.path(), pattern, fmt::join(names, ", ")));
  }

  // The fingerprints the profiled processes took of their sources: a file is read only when it
  // still has one (a profile from elsewhere may name any file of this machine).
  std::unordered_map<std::string, std::string> fingerprints;
  {
    auto st = file.prepare("SELECT substr(key, ?), value FROM run_info WHERE key >= ? AND key < ?");
    std::string prefix = kSourceFingerprintKey;
    st.bind(1, static_cast<std::int64_t>(prefix.size() + 1));
    st.bind(2, prefix);
    st.bind(3, prefix.substr(0, prefix.size() - 1) + char(prefix.back() + 1));
    while (st.step()) fingerprints.emplace(st.text(0), st.text(1));
  }
  auto verified_source = [&](const std::string& path) {
    auto recorded = fingerprints.find(path);
    if (recorded == fingerprints.end() || source_fingerprint(path) != recorded->second)
      return std::vector<std::string>{};
    return read_source_lines(path);
  };
  std::unordered_map<std::string, std::vector<std::string>> sources;
  LineCosts costs;
  for (const auto& [key, lines] : by_function) {
    const auto& [name, path, first_line] = key;
    LineFunction f;
    f.name = name;
    f.function = function_part(name);
    f.file = path;
    f.first_line = first_line;
    for (const auto& [line, sums] : lines) f.total_ns += sums.time_ns;
    auto src = sources.find(path);
    if (src == sources.end()) src = sources.emplace(path, verified_source(path)).first;
    f.source_shown = !src->second.empty();
    std::int64_t from = lines.begin()->first;
    if (first_line > 0) from = std::min(from, first_line);
    std::int64_t to = lines.rbegin()->first;
    for (std::int64_t line = std::max<std::int64_t>(from, 1); line <= to; ++line) {
      LineRow row;
      row.line = line;
      if (static_cast<std::size_t>(line) <= src->second.size())
        row.contents = src->second[static_cast<std::size_t>(line - 1)];
      if (auto it = lines.find(line); it != lines.end()) {
        row.recorded = true;
        row.hits = it->second.hits;
        row.time_ns = it->second.time_ns;
        row.pct = f.total_ns > 0
                      ? 100.0 * static_cast<double>(row.time_ns) / static_cast<double>(f.total_ns)
                      : 0.0;
        row.us_per_hit =
            row.hits > 0 ? static_cast<double>(row.time_ns) / 1e3 / static_cast<double>(row.hits)
                         : 0.0;
      }
      f.lines.push_back(std::move(row));
    }
    costs.functions.push_back(std::move(f));
  }
  std::stable_sort(costs.functions.begin(), costs.functions.end(),
                   [](const LineFunction& a, const LineFunction& b) {
                     if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
                     return a.name < b.name;
                   });
  return costs;
}

}  // namespace sonde::analyzers
