// The flat profile (`sonde report`): one row per routine, merged over threads and processes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profile/profile_file.hpp"
#include "profile/run_summary.hpp"
#include "render/table_format.hpp"

namespace sonde::analyzers {

enum class ReportSort { kExclusive, kInclusive, kCalls };
ReportSort parse_report_sort(std::string_view name);  // "excl", "incl", "calls"

struct HotspotRow {
  std::string name;
  std::string kind;
  std::int64_t calls = 0;
  std::int64_t subrs = 0;
  std::int64_t incl_ns = 0;  // recursive nodes left out, so recursion is not counted twice
  std::int64_t excl_ns = 0;
  double pct_time = 0;       // inclusive as % of the total
  double incl_us_per_call = 0;
};

struct Hotspots {
  std::int64_t total_ns = 0;  // sum of the thread roots' inclusive time: the 100 %
  std::vector<HotspotRow> rows;  // sorted, all of them
};

Hotspots compute_hotspots(const ProfileFile& file, ReportSort sort = ReportSort::kExclusive);

// top = 0 means every row.
Table hotspots_table(const Hotspots& hotspots, std::size_t top);
std::string render_report_text(const RunSummary& run, const Hotspots& hotspots, std::size_t top);
Json render_report_json(const std::string& path, const RunSummary& run, const Hotspots& hotspots,
                        std::size_t top);

}  // namespace sonde::analyzers
