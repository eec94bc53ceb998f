// Per-line costs as recorded by `python3 -m sonde --lines PATTERN` (the line_costs table): for
// each matching Python function, one row per source line, merged over threads and processes.
// `sonde report --by line` renders them (render/line_report).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct LineRow {
  std::int64_t line = 0;
  bool recorded = false;  // false: a line without a row in line_costs (shown blank)
  std::int64_t hits = 0;
  std::int64_t time_ns = 0;  // includes the calls the line makes
  double pct = 0;            // time as % of the function's total
  double us_per_hit = 0;
  std::string contents;  // the source line without its newline; empty if unreadable
};

struct LineFunction {
  std::string name;      // the routine name, e.g. "train.py:282(update_core_cpu)"
  std::string function;  // the part inside the parentheses, e.g. "update_core_cpu"
  std::string file;      // full path of the source, as recorded
  std::int64_t first_line = 0;
  std::int64_t total_ns = 0;   // sum of its lines' time: the function's 100 %
  std::vector<LineRow> lines;  // every line from the first line up to the last recorded one
  // The file's text is shown only while it is the one profiled (its fingerprint, run_info
  // source.fnv1a64:PATH): false when it is gone, changed, or never fingerprinted.
  bool source_shown = false;
};

struct LineCosts {
  std::vector<LineFunction> functions;  // by total time, largest first
};

// "update_core_cpu" for "train.py:282(update_core_cpu)"; the whole name if it has no "(...)".
std::string function_part(std::string_view routine_name);
// fnmatch-style glob on the function part or on the whole routine name; empty matches all.
bool line_pattern_matches(std::string_view routine_name, std::string_view pattern);

// Throws Error (exit 1) when the file has no line costs, or none of a function matching pattern.
LineCosts compute_line_costs(const ProfileFile& file, std::string_view pattern = {});

}  // namespace sonde::analyzers
