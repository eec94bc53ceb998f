#include "render/metrics_report.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "render/metrics_tables.hpp"

namespace sonde::analyzers {
namespace {

constexpr std::array<std::string_view, 6> kSections{"roofline", "phases",  "breakdown",
                                                    "counters", "kernels", "graphs"};

Cell opt(const std::optional<double>& v) { return v ? Cell{*v} : Cell{}; }

double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

std::string peaks_line(const RunFacts& facts) {
  std::string out;
  for (const auto& [key, value] : facts.peaks) {
    const auto& [resource, threads] = key;
    out += fmt::format("{}{} {}{:.1f} {}", out.empty() ? "" : ", ", resource,
                       threads == 0 ? "" : fmt::format("({} thr) ", threads), value,
                       resource == "mem.bw" ? "GB/s" : "GFLOP/s");
  }
  return out.empty() ? "no peaks: run `sonde calibrate` for % of peak and the roofline"
                     : "peaks: " + out;
}

// [{"rank": R, "iterations": N}, ...] where several ranks train, else [].
Json rank_iterations_json(const Breakdown& b) {
  Json out = Json::array();
  for (auto [rank, n] : b.rank_iterations) out.push_back(Json{{"rank", rank}, {"iterations", n}});
  return out;
}

}  // namespace

std::vector<std::string> parse_metrics_sections(std::string_view name) {
  if (name == "all") return {kSections.begin(), kSections.end()};
  for (std::string_view s : kSections)
    if (s == name) return {std::string(s)};
  throw Error(
      fmt::format(
          "unknown section '{}' (all, roofline, phases, breakdown, counters, kernels, graphs)",
          name),
      2);
}

MetricsReport compute_metrics_report(const ProfileFile& file,
                                     const std::vector<PhaseMapping>& mappings) {
  LoadedProfile profile(file);
  return compute_metrics_report(profile, mappings);
}

MetricsReport compute_metrics_report(LoadedProfile& profile,
                                     const std::vector<PhaseMapping>& mappings) {
  return {profile.metrics(),
          mappings.empty() ? profile.breakdown() : compute_breakdown(profile, mappings),
          compute_counter_report(profile.file()), profile.gpu()};
}

Table roofline_table(const Metrics& m, std::size_t top) {
  Table t;
  t.columns = {{"routine", "routine"},
               {"kind", "kind"},
               {"calls", "calls"},
               {"incl_s", "incl_s", 3},
               {"GFLOP/s", "gflops", 2},
               {"% peak", "pct_peak", 1},
               {"FLOP/byte", "intensity", 2},
               {"attainable", "attainable_gflops", 2},
               {"bound", "bound"},
               // The routine's identity (names may repeat): CSV and JSON only, last.
               {"routine_id", "routine_id", 0}};
  for (const RoutineMetrics& r : m.routines) {
    if (r.flops <= 0) continue;  // no cost model, no roofline
    if (top && t.rows.size() >= top) break;
    t.rows.push_back({r.name, r.kind, r.calls, seconds(r.incl_ns), opt(r.perf.gflops),
                      opt(r.perf.pct_peak), opt(r.perf.intensity), opt(r.perf.attainable_gflops),
                      r.perf.bound ? Cell{*r.perf.bound} : Cell{}, r.routine_id});
  }
  return t;
}

Table phases_table(const Metrics& m, std::size_t top) {
  Table t;
  t.columns = {{"phase", "phase"},          {"kind", "kind"},
               {"calls", "calls"},          {"incl_s", "incl_s", 3},
               {"% total", "pct_total", 1}, {"excl_s", "excl_s", 3},
               {"GFLOP/s", "gflops", 2},    {"BLAS %", "blas_pct", 1}};
  for (const RoutineMetrics* r : phases(m)) {
    if (top && t.rows.size() >= top) break;
    t.rows.push_back({r->name, r->kind, r->calls, seconds(r->incl_ns), r->pct_total,
                      seconds(r->excl_ns), opt(r->gflops_under), opt(r->blas_pct)});
  }
  return t;
}

Table kernels_table(const GpuSummary& gpu, std::size_t top) {
  Table t;
  t.columns = {{"kernel", "kernel"},
               {"launches", "launches"},
               {"time_s", "time_s", 4},
               {"measured", "metric_launches"},
               {"warps/inst", "warps_per_inst", 4},
               {"inst/gld", "inst_per_gld", 1},
               {"(warps/inst)*t", "warps_per_inst_x_time_s", 6},
               {"(gld/inst)*t", "gld_per_inst_x_time_s", 6},
               {"SM %", "sm_pct_peak", 1},
               {"mem %", "memory_pct_peak", 1}};
  for (const GpuKernel* k : rank_kernels_as_tau(gpu.kernels)) {
    if (top && t.rows.size() >= top) break;
    double time_s = seconds(k->time_ns);
    auto times = [&](const std::optional<double>& v) { return v ? Cell{*v * time_s} : Cell{}; };
    t.rows.push_back(
        {k->name, k->calls, time_s, k->metric_launches, opt(k->warps_per_inst),
         k->gld_per_inst && *k->gld_per_inst > 0 ? Cell{1.0 / *k->gld_per_inst} : Cell{},
         times(k->warps_per_inst), times(k->gld_per_inst), opt(k->sm_pct), opt(k->memory_pct)});
  }
  return t;
}

Table graphs_table(const GpuSummary& gpu, std::size_t top) {
  Table t;
  t.columns = {{"kernel", "kernel"},           {"kind", "kind"},
               {"captured at", "captured_at"}, {"replayed by", "replayed_by"},
               {"records", "records"},         {"time_s", "time_s", 4}};
  for (const GraphReplay& g : gpu.graphs) {
    if (top && t.rows.size() >= top) break;
    t.rows.push_back({g.name, g.kind, g.captured_at,
                      g.replayed_by.empty() ? Cell{} : Cell{g.replayed_by}, g.records,
                      seconds(g.time_ns)});
  }
  return t;
}

Table metrics_section_table(const MetricsReport& r, const std::string& section, std::size_t top) {
  if (section == "roofline") return roofline_table(r.metrics, top);
  if (section == "phases") return phases_table(r.metrics, top);
  if (section == "breakdown") return breakdown_table(r.breakdown);
  if (section == "kernels") return kernels_table(r.gpu, top);
  if (section == "graphs") return graphs_table(r.gpu, top);
  return counter_table(r.counters, top);
}

std::string render_metrics_text(const MetricsReport& r, const std::vector<std::string>& sections,
                                std::size_t top) {
  std::string out;
  for (const std::string& s : sections) {
    if (!out.empty()) out += '\n';
    Table t = metrics_section_table(r, s, top);
    if (s == "roofline") {
      out += "Roofline per routine (" + peaks_line(r.metrics.facts) + ")\n";
      if (t.rows.empty()) {
        out += "no routine with a FLOP model was called\n";
        continue;
      }
      t.columns.pop_back();  // the routine id: the names are the text's
      for (auto& row : t.rows) row.pop_back();
    } else if (s == "phases") {
      out += fmt::format(
          "Time per phase (regions and Python functions, inclusive; % total: "
          "of {:.3f} s, the busy threads' time)\n",
          seconds(r.metrics.total_ns));
      if (t.rows.empty()) {
        out += "no regions or Python functions recorded\n";
        continue;
      }
    } else if (s == "breakdown") {
      const Breakdown& b = r.breakdown;
      if (!b.found) {
        out += "Iteration breakdown: cannot tell (" + b.reason +
               "). Mark the phases with regions named forward, backward, update (with "
               "sonde.region(\"forward\") in Python, sonde_region_begin/end in C and C++) or "
               "name them with --phase CLASS=GLOB.\n";
        continue;
      }
      // A merged file's ranks each ran their iterations: said per rank, and the sum.
      std::string iterations = fmt::format("{} iterations", b.iterations);
      if (!b.rank_iterations.empty()) {
        auto [low, high] =
            std::minmax_element(b.rank_iterations.begin(), b.rank_iterations.end(),
                                [](const auto& x, const auto& y) { return x.second < y.second; });
        iterations = low->second == high->second
                         ? fmt::format(
                               "{} iterations on each of {} ranks, {} in all; ms/iter "
                               "per rank's iteration",
                               low->second, b.rank_iterations.size(), b.iterations)
                         : fmt::format(
                               "{}-{} iterations a rank over {} ranks, {} in all; "
                               "ms/iter per rank's iteration",
                               low->second, high->second, b.rank_iterations.size(), b.iterations);
      }
      out += fmt::format(
          "Iteration breakdown ({}, counted at {}; loop in {}{}; "
          "% thread: of {:.3f} s, the time of the {} {} thread{})\n",
          iterations, b.iterations_from, b.loop,
          b.body == b.loop ? "" : ", iterations through " + b.body, seconds(b.threads_ns),
          b.threads, b.inference ? "evaluation" : "training", b.threads == 1 ? "" : "s");
      if (b.gpu)
        out +=
            "gpu_s: device time of the kernels, copies and memsets launched in each phase "
            "(NCCL kernels are t_comm, host-to-device copies t_h2d; summed over streams and "
            "devices); time_s is the host's\n";
      out += render_text(t);
      if (!b.overlap.empty()) {
        out +=
            "GPU communication/compute overlap per device (kernels launched in the "
            "iterations; unions of intervals, so concurrent kernels count once)\n";
        out += render_text(breakdown_overlap_table(b));
      }
      if (b.left_out_threads > 0)
        out += fmt::format(
            "left out: {} thread(s) that ran no iteration of the loop, {:.3f} s measured "
            "besides their waits for work\n",
            b.left_out_threads, seconds(b.left_out_ns));
      for (const std::string& note : b.notes) out += "note: " + note + "\n";
      continue;
    } else if (s == "kernels") {
      out += "GPU kernels, ranked as TAU ranks tuning candidates (warps per instruction x time)\n";
      if (t.rows.empty()) {
        out += "no GPU kernels recorded\n";
        continue;
      }
      bool measured = std::any_of(r.gpu.kernels.begin(), r.gpu.kernels.end(),
                                  [](const GpuKernel& k) { return k.metric_launches > 0; });
      if (!measured) out += "(no per-kernel metrics: run with SONDE_GPU_METRICS=tau; by time)\n";
    } else if (s == "graphs") {
      out +=
          "CUDA graph replays by the call path their graph nodes were captured at (the same "
          "work is under the replaying call in kernels and in the tree's gpu s)\n";
      if (t.rows.empty()) {
        out += "no CUDA graph replay with a known capture path\n";
        continue;
      }
    } else {
      out += "Counter metrics per routine (inclusive)\n";
      if (r.counters.events.empty()) {
        out += "no counters recorded: run with SONDE_COUNTERS=EV1,EV2 (sonde run --counters)\n";
        continue;
      }
      if (r.counters.metrics.empty())
        out += "(no derived metric can be computed from these events; raw counts below)\n";
    }
    out += render_text(t);
  }
  return out;
}

Json render_metrics_json(const MetricsReport& r, const std::vector<std::string>& sections,
                         std::size_t top) {
  Json out = Json::object();
  for (const std::string& s : sections) {
    Json rows = render_json(metrics_section_table(r, s, top));
    if (s == "breakdown") {
      const Breakdown& b = r.breakdown;
      out[s] = Json{{"found", b.found},
                    {"inference", b.inference},
                    {"reason", b.reason},
                    {"iterations", b.iterations},
                    {"iterations_from", b.iterations_from},
                    {"rank_iterations", rank_iterations_json(b)},
                    {"loop", b.loop},
                    {"body", b.body},
                    {"threads", b.threads},
                    {"left_out_threads", b.left_out_threads},
                    {"left_out_s", seconds(b.left_out_ns)},
                    {"notes", b.notes},
                    {"run_s", seconds(b.run_ns)},
                    {"threads_s", seconds(b.threads_ns)},
                    {"gpu", b.gpu},
                    {"phases", std::move(rows)},
                    {"gpu_overlap", render_json(breakdown_overlap_table(b))}};
    } else if (s == "counters") {
      out[s] = Json{{"events", r.counters.events}, {"routines", std::move(rows)}};
    } else {
      out[s] = std::move(rows);
    }
  }
  return out;
}

}  // namespace sonde::analyzers
