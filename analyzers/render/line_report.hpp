// Per-line costs (`sonde report --by line`): for each Python function recorded by
// `python3 -m sonde --lines PATTERN`, one row per source line, merged over threads and processes,
// like line_profiler.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/table_format.hpp"
#include "profile/line_costs.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// One row per recorded line: function, file, line, hits, time_s, pct, contents.
Table line_costs_table(const LineCosts& costs);
std::string render_line_report_text(const LineCosts& costs);
Json render_line_report_json(const std::string& path, const LineCosts& costs);

}  // namespace sonde::analyzers
