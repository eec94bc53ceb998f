#include "sonde/analyzers/report.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace sonde::analyzers {

ReportSort parse_report_sort(std::string_view name) {
  if (name == "excl") return ReportSort::kExclusive;
  if (name == "incl") return ReportSort::kInclusive;
  if (name == "calls") return ReportSort::kCalls;
  throw Error(fmt::format("unknown sort key '{}' (expected excl, incl or calls)", name), 2);
}

Hotspots compute_hotspots(const ProfileFile& file, ReportSort sort) {
  Hotspots h;
  {
    auto st = file.prepare(
        "SELECT COALESCE(SUM(incl_ns), 0) FROM nodes WHERE depth = 0");
    if (st.step()) h.total_ns = st.int64(0);
  }
  // Merged by name and kind rather than routine_id: the same routine seen from two libraries
  // (or two processes' ids in a merged file) is one line for the reader.
  auto st = file.prepare(
      "SELECT r.name, r.kind, SUM(n.calls), SUM(n.subrs), "
      "       SUM(CASE WHEN n.recursive = 0 THEN n.incl_ns ELSE 0 END), SUM(n.excl_ns) "
      "FROM nodes n JOIN routines r USING (routine_id) GROUP BY r.name, r.kind");
  while (st.step()) {
    HotspotRow row;
    row.name = st.text(0);
    row.kind = st.text(1);
    row.calls = st.int64(2);
    row.subrs = st.int64(3);
    row.incl_ns = st.int64(4);
    row.excl_ns = st.int64(5);
    row.pct_time = h.total_ns > 0 ? 100.0 * static_cast<double>(row.incl_ns) /
                                        static_cast<double>(h.total_ns)
                                  : 0.0;
    row.incl_us_per_call =
        row.calls > 0 ? static_cast<double>(row.incl_ns) / 1e3 / static_cast<double>(row.calls)
                      : 0.0;
    h.rows.push_back(std::move(row));
  }
  auto key = [sort](const HotspotRow& r) {
    switch (sort) {
      case ReportSort::kInclusive: return r.incl_ns;
      case ReportSort::kCalls: return r.calls;
      default: return r.excl_ns;
    }
  };
  std::stable_sort(h.rows.begin(), h.rows.end(), [&](const HotspotRow& a, const HotspotRow& b) {
    if (key(a) != key(b)) return key(a) > key(b);
    if (a.incl_ns != b.incl_ns) return a.incl_ns > b.incl_ns;
    return a.name < b.name;
  });
  return h;
}

Table hotspots_table(const Hotspots& h, std::size_t top) {
  Table t;
  t.columns = {{"%Time", "pct_time", 1},
               {"Exclusive msec", "excl_ms", 3},
               {"Inclusive total msec", "incl_ms", 3},
               {"#Call", "calls", 0},
               {"#Subrs", "subrs", 0},
               {"Inclusive usec/call", "incl_us_per_call", 1},
               {"Name", "name", 0},
               {"Kind", "kind", 0}};
  std::size_t n = top == 0 ? h.rows.size() : std::min(top, h.rows.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto& r = h.rows[i];
    t.rows.push_back({r.pct_time, static_cast<double>(r.excl_ns) / 1e6,
                      static_cast<double>(r.incl_ns) / 1e6, r.calls, r.subrs,
                      r.incl_us_per_call, r.name, r.kind});
  }
  return t;
}

std::string render_report_text(const RunSummary& run, const Hotspots& h, std::size_t top) {
  std::string out = render_run_header(run);
  out += fmt::format("total:     {:.3f} s (sum of the threads' inclusive time = 100 %)\n\n",
                     static_cast<double>(h.total_ns) / 1e9);
  Table t = hotspots_table(h, top);
  // In text the kind reads better beside the name, as the tree shows it.
  for (auto& row : t.rows) {
    row[6] = fmt::format("{} [{}]", std::get<std::string>(row[6]), std::get<std::string>(row[7]));
    row.pop_back();
  }
  t.columns.pop_back();
  out += render_text(t);
  if (top != 0 && h.rows.size() > top)
    out += fmt::format("({} more routines; --top 0 shows all)\n", h.rows.size() - top);
  return out;
}

Json render_report_json(const std::string& path, const RunSummary& run, const Hotspots& h,
                        std::size_t top) {
  return Json{{"file", path},
              {"run", run_summary_to_json(run)},
              {"notes", notes_to_json(run)},
              {"total_s", static_cast<double>(h.total_ns) / 1e9},
              {"rows", render_json(hotspots_table(h, top))}};
}

}  // namespace sonde::analyzers
