// The flat profile's figures: the `hotspots` (or `rank_hotspots`) view's rows and the
// `run_totals` denominators, read as they are; `sonde report` renders them (render/report).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

enum class ReportSort { kExclusive, kInclusive, kCalls, kName, kFile, kLine };
// sonde's sort names ("excl", "incl", "calls") and every key of cProfile's -s (pstats'
// sort_stats), so a cProfile user's habit works everywhere sonde sorts: "tottime"/"time",
// "cumtime"/"cumulative", "ncalls" and "pcalls" (sonde counts a recursive call once, as
// primitive calls); the names ascending: "name", "stdname" and "nfl" by the name sonde shows
// ("train.py:10(step)", a Python frame's file, line and function), "file", "filename" and
// "module" by file and line, "line" by line. python3 -m sonde -s name exited 2 where cProfile
// sorts (a red-team find).
inline constexpr std::pair<std::string_view, ReportSort> kReportSorts[] = {
    {"excl", ReportSort::kExclusive},    {"tottime", ReportSort::kExclusive},
    {"time", ReportSort::kExclusive},    {"incl", ReportSort::kInclusive},
    {"cumtime", ReportSort::kInclusive}, {"cumulative", ReportSort::kInclusive},
    {"calls", ReportSort::kCalls},       {"ncalls", ReportSort::kCalls},
    {"pcalls", ReportSort::kCalls},      {"name", ReportSort::kName},
    {"stdname", ReportSort::kName},      {"nfl", ReportSort::kName},
    {"file", ReportSort::kFile},         {"filename", ReportSort::kFile},
    {"module", ReportSort::kFile},       {"line", ReportSort::kLine}};
std::vector<std::string> report_sort_names();
ReportSort parse_report_sort(std::string_view name);

// One row of the `hotspots` view: one routine (kind, library or file, line, name), merged over
// the busy threads of every process.
struct HotspotRow {
  std::int64_t routine_id = 0;
  std::string name;  // the display name: two rows may share it, never their numbers
  std::string kind;
  std::string library;
  std::string file;
  std::int64_t line = 0;
  std::int64_t calls = 0;
  std::int64_t subrs = 0;
  std::int64_t incl_ns = 0;  // recursive nodes left out, so recursion is not counted twice
  std::int64_t excl_ns = 0;
  double pct_time = 0;  // inclusive as % of the busy threads' time (incl_pct)
  double excl_pct = 0;
  double incl_us_per_call = 0;
  // Adaptive timing (the scaled_times view): the standard error of incl_ns, its times scaled
  // from sampled calls; negative when every call was timed.
  double incl_se_ns = -1;
};

// The denominators (the `run_totals` view; docs/metrics.md).
struct Hotspots {
  std::int64_t total_ns = 0;  // the busy threads' time summed: the 100 % of every row
  std::int64_t wall_ns = 0;   // the run's total: first process start to last process end
  std::int64_t busy_threads = 0;
  std::int64_t idle_threads = 0;  // registered without a measured call: in no denominator
  // Waiting for work most of their life (thread_times.waiting): their calls alone counted.
  std::int64_t waiting_threads = 0;
  // Busy threads (not the first) on a CPU under 5 % of their counted time, and that time in
  // total_ns: waits sonde cannot name (run_totals.off_cpu_threads, off_cpu_s).
  std::int64_t off_cpu_threads = 0, off_cpu_ns = 0;
  // The waits for work of threads other than the first, left out of total_ns (the view waits:
  // run_totals.waited_s).
  std::int64_t waited_ns = 0;
  std::vector<HotspotRow> rows;  // sorted, all of them
};

// Reads the `hotspots` and `run_totals` views; sorting is the only thing done here. One rank's
// are those of its file (open_profile with the rank, rank_file.hpp).
Hotspots compute_hotspots(const ProfileFile& file, ReportSort sort = ReportSort::kExclusive);

}  // namespace sonde::analyzers
