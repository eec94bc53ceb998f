// The flat profile (`sonde report`): one row per routine, merged over threads and processes, as
// profile/hotspots reads them.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "profile/hotspots.hpp"
#include "profile/profile_file.hpp"
#include "profile/run_summary.hpp"

namespace sonde::analyzers {

// "name [kind]", followed by the file and line (or library) when `ambiguous`: another routine
// has the same name and kind.
std::string display_name(const HotspotRow& row, bool ambiguous);
std::set<std::pair<std::string, std::string>> ambiguous_names(const Hotspots& hotspots);
// The run's total and the denominator of %Time, as printed above the table.
std::string denominators_text(const Hotspots& hotspots);

// top = 0 means every row.
Table hotspots_table(const Hotspots& hotspots, std::size_t top);
// One line, when the file has CUDA graph replays with a known capture path: how many, and
// where to see them (sonde tree's graph s, sonde metrics --section graphs); else empty.
std::string render_graphs_hint(const ProfileFile& file);

std::string render_report_text(const RunSummary& run, const Hotspots& hotspots, std::size_t top);
Json render_report_json(const std::string& path, const RunSummary& run, const Hotspots& hotspots,
                        std::size_t top);

}  // namespace sonde::analyzers
