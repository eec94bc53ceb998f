#include "render/report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace sonde::analyzers {

namespace {

// Rows whose times adaptive timing scaled: "~" after the name and the error beside it, and one
// line under the table saying what the mark means.
std::string scaled_suffix(const HotspotRow& r) {
  if (r.incl_se_ns < 0) return "";
  double pct = r.incl_ns > 0 ? 100.0 * r.incl_se_ns / static_cast<double>(r.incl_ns) : 0.0;
  return fmt::format(" ~±{:.1f}%", pct);
}

}  // namespace

std::string display_name(const HotspotRow& row, bool ambiguous) {
  std::string out = fmt::format("{} [{}]", row.name, row.kind);
  if (!ambiguous) return out;
  // Two routines of one display name: say where each is, so the reader sees two codes.
  if (!row.file.empty()) return out + fmt::format(" {}:{}", row.file, row.line);
  if (!row.library.empty()) return out + fmt::format(" ({})", row.library);
  return out + fmt::format(" #{}", row.routine_id);
}

std::set<std::pair<std::string, std::string>> ambiguous_names(const Hotspots& h) {
  std::set<std::pair<std::string, std::string>> seen, twice;
  for (const auto& r : h.rows)
    if (!seen.insert({r.name, r.kind}).second) twice.insert({r.name, r.kind});
  return twice;
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
               {"Kind", "kind", 0},
               {"Library", "library", 0},
               {"File", "file", 0},
               {"Line", "line", 0},
               // The routine's identity in this file: two routines may share a name.
               {"Routine", "routine_id", 0}};
  std::size_t n = top == 0 ? h.rows.size() : std::min(top, h.rows.size());
  for (std::size_t i = 0; i < n; ++i) {
    const auto& r = h.rows[i];
    t.rows.push_back({r.pct_time, static_cast<double>(r.excl_ns) / 1e6,
                      static_cast<double>(r.incl_ns) / 1e6, r.calls, r.subrs, r.incl_us_per_call,
                      r.name, r.kind, r.library, r.file, r.line, r.routine_id});
  }
  return t;
}

std::string denominators_text(const Hotspots& h) {
  std::string idle;
  if (h.waiting_threads > 0)
    idle += fmt::format("; {} waiting for work, by {} calls alone", h.waiting_threads,
                        h.waiting_threads == 1 ? "its" : "their");
  if (h.idle_threads > 0)
    idle +=
        fmt::format("; {} idle thread{} left out", h.idle_threads, h.idle_threads == 1 ? "" : "s");
  std::string out = fmt::format(
      "total:     {:.3f} s wall time\n%Time of:  {:.3f} s, the busy threads' time ({} "
      "thread{}{})\n",
      static_cast<double>(h.wall_ns) / 1e9, static_cast<double>(h.total_ns) / 1e9, h.busy_threads,
      h.busy_threads == 1 ? "" : "s", idle);
  // What the 100 % leaves out of the threads' time, for a reader who adds it up: a DataLoader
  // run's queue-feeder and resource-sharer threads waited 1.6 s (4.1 s of a 7.1 s 100 %
  // against 1.6 s of wall time, before their waits were left out).
  if (h.waited_ns > 0)
    out += fmt::format(
        "           left out: {:.3f} s of waits for work (helper threads' and DataLoader "
        "workers' threading, selectors and socket waits, joins of threads and child processes; "
        "sonde tree "
        "shows each thread)\n",
        static_cast<double>(h.waited_ns) / 1e9);
  // Said where it weighs: a tenth of the 100 % or more in threads on a CPU under 5 % of their
  // counted time: waits sonde cannot name (time.sleep in a Python function, a C call), or a
  // wait for a CPU (48 decoding threads on 2 cores: each on one 4 % of its time).
  if (h.off_cpu_threads > 0 && 10 * h.off_cpu_ns >= h.total_ns)
    out += fmt::format(
        "           {:.3f} s of it in {} thread{} on a CPU under 5 % of that time: waits sonde "
        "cannot name, or for a CPU (sonde tree shows each thread)\n",
        static_cast<double>(h.off_cpu_ns) / 1e9, h.off_cpu_threads,
        h.off_cpu_threads == 1 ? "" : "s");
  return out;
}

std::string render_report_text(const RunSummary& run, const Hotspots& h, std::size_t top) {
  std::string out = render_run_header(run);
  out += denominators_text(h) + "\n";
  Table t = hotspots_table(h, top);
  auto twice = ambiguous_names(h);
  // In text the kind reads better beside the name, as the tree shows it; where routines share
  // a name, their file or library follows.
  for (std::size_t i = 0; i < t.rows.size(); ++i) {
    const HotspotRow& r = h.rows[i];
    t.rows[i][6] = display_name(r, twice.count({r.name, r.kind}) != 0) + scaled_suffix(r);
    t.rows[i].resize(7);
  }
  t.columns.resize(7);
  out += render_text(t);
  if (std::any_of(h.rows.begin(), h.rows.end(), [](const auto& r) { return r.incl_se_ns >= 0; })) {
    out +=
        "~ times scaled from a random sample of calls (adaptive timing), ± one standard error "
        "of the inclusive time; call counts are exact\n";
  }
  if (top != 0 && h.rows.size() > top)
    out += fmt::format("({} more routines; --top 0 shows all)\n", h.rows.size() - top);
  return out;
}

std::string render_graphs_hint(const ProfileFile& file) {
  auto st = file.prepare(
      "SELECT COUNT(*), COALESCE(SUM(records), 0), COALESCE(SUM(ns), 0) "
      "FROM gpu_graph_origins");
  if (!st.step() || st.int64(0) == 0) return "";
  return fmt::format(
      "CUDA graphs: {} replayed GPU records ({:.3f} s of device time) are also "
      "counted where their graph nodes were captured: `sonde tree` shows them as "
      "graph s, `sonde metrics --section graphs` lists them\n",
      st.int64(1), static_cast<double>(st.int64(2)) / 1e9);
}

Json render_report_json(const std::string& path, const RunSummary& run, const Hotspots& h,
                        std::size_t top) {
  return Json{{"file", path},
              {"run", run_summary_to_json(run)},
              {"notes", notes_to_json(run)},
              {"wall_s", static_cast<double>(h.wall_ns) / 1e9},
              {"total_s", static_cast<double>(h.total_ns) / 1e9},
              {"busy_threads", h.busy_threads},
              {"idle_threads", h.idle_threads},
              {"waiting_threads", h.waiting_threads},
              {"off_cpu_threads", h.off_cpu_threads},
              {"off_cpu_s", static_cast<double>(h.off_cpu_ns) / 1e9},
              {"waited_s", static_cast<double>(h.waited_ns) / 1e9},
              {"rows", render_json(hotspots_table(h, top))}};
}

}  // namespace sonde::analyzers
