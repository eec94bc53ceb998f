#include "render/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

namespace sonde::analyzers {

ReportSort parse_report_sort(std::string_view name) {
  if (name == "excl") return ReportSort::kExclusive;
  if (name == "incl") return ReportSort::kInclusive;
  if (name == "calls") return ReportSort::kCalls;
  throw Error(fmt::format("unknown sort key '{}' (expected excl, incl or calls)", name), 2);
}

Hotspots compute_hotspots(const ProfileFile& file, ReportSort sort) {
  Hotspots h;
  // One plain scan aggregated here is several times faster than GROUP BY over a join, which
  // matters for the 1M-node files `sonde report` must still answer in under a second.
  struct Sums {
    std::int64_t calls = 0, subrs = 0, incl_ns = 0, excl_ns = 0;
  };
  std::unordered_map<std::int64_t, Sums> by_routine;
  {
    auto st = file.prepare("SELECT routine_id, calls, subrs, incl_ns, excl_ns, recursive, depth "
                           "FROM nodes");
    while (st.step()) {
      Sums& sums = by_routine[st.int64(0)];
      sums.calls += st.int64(1);
      sums.subrs += st.int64(2);
      // A recursive node's time is already inside its outer call's inclusive time.
      if (st.int64(5) == 0) sums.incl_ns += st.int64(3);
      sums.excl_ns += st.int64(4);
      if (st.int64(6) == 0) h.total_ns += st.int64(3);
    }
  }
  // Merged by name and kind rather than routine_id: the same routine seen from two libraries
  // (or two processes' ids in a merged file) is one line for the reader.
  std::map<std::pair<std::string, std::string>, Sums> by_name;
  {
    auto st = file.prepare("SELECT routine_id, name, kind FROM routines");
    while (st.step()) {
      auto it = by_routine.find(st.int64(0));
      if (it == by_routine.end()) continue;
      Sums& sums = by_name[{st.text(1), st.text(2)}];
      sums.calls += it->second.calls;
      sums.subrs += it->second.subrs;
      sums.incl_ns += it->second.incl_ns;
      sums.excl_ns += it->second.excl_ns;
    }
  }
  for (const auto& [key, sums] : by_name) {
    HotspotRow row;
    row.name = key.first;
    row.kind = key.second;
    row.calls = sums.calls;
    row.subrs = sums.subrs;
    row.incl_ns = sums.incl_ns;
    row.excl_ns = sums.excl_ns;
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
