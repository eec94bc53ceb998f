#include "render/scaling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace sonde::analyzers {
namespace {

Cell opt(const std::optional<double>& v) { return v ? Cell(*v) : Cell(); }

}  // namespace

Table scaling_runs_table(const Scaling& s) {
  Table t;
  t.columns = {{"ranks", "ranks", 0},     {"threads", "threads", 0},
               {"workers", "workers", 0}, {"time s", "time_s"},
               {"speedup", "speedup", 2}, {"efficiency %", "efficiency_pct", 1},
               {"file", "file"}};
  const ScalingRun& ref = s.runs.front();
  for (const ScalingRun& r : s.runs) {
    double eff = scaling_efficiency(ref.time_s, ref.workers(), r.time_s, r.workers(), s.weak);
    t.rows.push_back({r.ranks, r.threads, r.workers(), r.time_s,
                      r.time_s > 0 ? Cell(ref.time_s / r.time_s) : Cell(), 100.0 * eff, r.path});
  }
  return t;
}

Table scaling_loop_table(const Scaling& s) {
  Table t;
  t.columns = {{"ranks", "ranks", 0},
               {"threads", "threads", 0},
               {"workers", "workers", 0},
               {"loop s", "loop_s"},
               {"iterations", "iterations", 0},
               {"speedup", "speedup", 2},
               {"efficiency %", "efficiency_pct", 1},
               {"file", "file"}};
  const ScalingRun& ref = s.runs.front();
  for (const ScalingRun& r : s.runs) {
    Cell eff, speedup;
    if (ref.loop_s && r.loop_s && *r.loop_s > 0) {
      eff = 100.0 * scaling_efficiency(*ref.loop_s, ref.workers(), *r.loop_s, r.workers(), s.weak);
      speedup = *ref.loop_s / *r.loop_s;
    }
    t.rows.push_back({r.ranks, r.threads, r.workers(), opt(r.loop_s),
                      r.iterations ? Cell(*r.iterations) : Cell(), speedup, eff, r.path});
  }
  return t;
}

// One time and one efficiency column per run, titled by its ranks x threads.
Table scaling_routines_table(const Scaling& s) {
  Table t;
  t.columns = {{"routine", "routine"}, {"kind", "kind"}};
  auto same_shape = [&](std::size_t i) {
    for (std::size_t k = 0; k < s.runs.size(); ++k)
      if (k != i && s.runs[k].ranks == s.runs[i].ranks && s.runs[k].threads == s.runs[i].threads)
        return true;
    return false;
  };
  for (std::size_t i = 0; i < s.runs.size(); ++i) {
    // Two runs of one shape read "1x2 s" twice: the run's place in the runs table tells them.
    std::string label = fmt::format("{}x{}", s.runs[i].ranks, s.runs[i].threads);
    if (same_shape(i)) label += fmt::format(" #{}", i + 1);
    t.columns.push_back({label + " s", fmt::format("time_s_{}", i)});
    if (i > 0) t.columns.push_back({label + " eff %", fmt::format("efficiency_pct_{}", i), 1});
  }
  const ScalingRun& ref = s.runs.front();
  for (const ScalingRoutine& r : s.routines) {
    std::vector<Cell> row = {r.routine, r.kind};
    for (std::size_t i = 0; i < s.runs.size(); ++i) {
      row.push_back(opt(r.time_s[i]));
      if (i == 0) continue;
      if (r.time_s[i] && r.time_s[0])
        row.push_back(100.0 * scaling_efficiency(*r.time_s[0], ref.workers(), *r.time_s[i],
                                                 s.runs[i].workers(), s.weak));
      else
        row.push_back(Cell());
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string render_scaling_text(const Scaling& s) {
  std::string out = fmt::format(
      "{} scaling against {} rank{} x {} thread{} ({})\n",
      s.weak ? "Weak (same problem per worker)" : "Strong (same global problem)",
      s.runs.front().ranks, s.runs.front().ranks == 1 ? "" : "s", s.runs.front().threads,
      s.runs.front().threads == 1 ? "" : "s", visible(s.runs.front().path));
  out += "\nWhole run (time: the slowest rank's wall time)\n" + render_text(scaling_runs_table(s));
  bool loops = std::all_of(s.runs.begin(), s.runs.end(),
                           [](const ScalingRun& r) { return r.loop_s.has_value(); });
  if (loops)
    out +=
        "\nTraining loop (time: the slowest rank's iterations, from the iteration breakdown; "
        "imports, rendezvous, set-up and teardown left out)\n" +
        render_text(scaling_loop_table(s));
  else
    out += fmt::format(
        "\nTraining loop: not compared (a run without a loop sonde finds, or of more than {} "
        "ranks)\n",
        kLoopRanks);
  out += "\nPer routine and phase (time: the slowest rank's inclusive time)\n";
  out += s.routines.empty() ? "  (none recorded)\n" : render_text(scaling_routines_table(s));
  return out;
}

Json render_scaling_json(const Scaling& s) {
  Json j = {{"mode", s.weak ? "weak" : "strong"},
            {"runs", render_json(scaling_runs_table(s))},
            {"loop", render_json(scaling_loop_table(s))}};
  Json routines = Json::array();
  const ScalingRun& ref = s.runs.front();
  for (const ScalingRoutine& r : s.routines) {
    Json times = Json::array(), eff = Json::array();
    for (std::size_t i = 0; i < s.runs.size(); ++i) {
      times.push_back(r.time_s[i] ? Json(*r.time_s[i]) : Json());
      eff.push_back(r.time_s[i] && r.time_s[0]
                        ? Json(100.0 * scaling_efficiency(*r.time_s[0], ref.workers(), *r.time_s[i],
                                                          s.runs[i].workers(), s.weak))
                        : Json());
    }
    routines.push_back(
        {{"routine", r.routine}, {"kind", r.kind}, {"time_s", times}, {"efficiency_pct", eff}});
  }
  j["routines"] = routines;
  j["warnings"] = s.warnings;
  return j;
}

}  // namespace sonde::analyzers
