#include "profile/hotspots.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <unordered_map>

namespace sonde::analyzers {

std::vector<std::string> report_sort_names() {
  std::vector<std::string> names;
  for (const auto& [name, sort] : kReportSorts) names.emplace_back(name);
  return names;
}

ReportSort parse_report_sort(std::string_view name) {
  for (const auto& [known, sort] : kReportSorts)
    if (name == known) return sort;
  throw Error(fmt::format("unknown sort key '{}' (expected {})", name,
                          fmt::join(report_sort_names(), ", ")),
              2);
}

namespace {

std::int64_t to_ns(double seconds) { return std::llround(seconds * 1e9); }

}  // namespace

Hotspots compute_hotspots(const ProfileFile& file, ReportSort sort) {
  Hotspots h;
  {
    auto st = file.prepare(
        "SELECT wall_s, thread_s, busy_threads, idle_threads, waiting_threads, off_cpu_threads, "
        "off_cpu_s, waited_s FROM run_totals");
    if (st.step()) {
      h.wall_ns = st.is_null(0) ? 0 : to_ns(st.real(0));
      h.total_ns = to_ns(st.real(1));
      h.busy_threads = st.int64(2);
      h.idle_threads = st.int64(3);
      h.waiting_threads = st.int64(4);
      h.off_cpu_threads = st.int64(5);
      h.off_cpu_ns = to_ns(st.real(6));
      h.waited_ns = to_ns(st.real(7));
    }
  }
  std::string_view order = sort == ReportSort::kInclusive ? "incl_s DESC, "
                           : sort == ReportSort::kCalls   ? "calls DESC, incl_s DESC, "
                           : sort == ReportSort::kName    ? ""
                           : sort == ReportSort::kFile    ? "file, line, "
                           : sort == ReportSort::kLine    ? "line, "
                                                          : "excl_s DESC, incl_s DESC, ";
  auto st = file.prepare(fmt::format(
      "SELECT routine_id, routine, kind, library, file, line, calls, subrs, incl_s, excl_s, "
      "incl_pct, excl_pct FROM hotspots ORDER BY {}routine, routine_id",
      order));
  while (st.step()) {
    HotspotRow row;
    row.routine_id = st.int64(0);
    row.name = st.text(1);
    row.kind = st.text(2);
    row.library = st.text(3);
    row.file = st.text(4);
    row.line = st.int64(5);
    row.calls = st.int64(6);
    row.subrs = st.int64(7);
    row.incl_ns = to_ns(st.real(8));
    row.excl_ns = to_ns(st.real(9));
    row.pct_time = st.real(10);
    row.excl_pct = st.real(11);
    row.incl_us_per_call =
        row.calls > 0 ? static_cast<double>(row.incl_ns) / 1e3 / static_cast<double>(row.calls)
                      : 0.0;
    h.rows.push_back(std::move(row));
  }
  if (file.has_table("scaled_times")) {
    std::unordered_map<std::int64_t, HotspotRow*> by_id;
    for (auto& row : h.rows) by_id.emplace(row.routine_id, &row);
    auto sc = file.prepare("SELECT routine_id, incl_se_s FROM scaled_times");
    while (sc.step())
      if (auto it = by_id.find(sc.int64(0)); it != by_id.end())
        it->second->incl_se_ns = sc.real(1) * 1e9;
  }
  return h;
}

}  // namespace sonde::analyzers
