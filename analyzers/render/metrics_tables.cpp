#include "render/metrics_tables.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace sonde::analyzers {

Table breakdown_table(const Breakdown& b) {
  Table t;
  t.columns = {{"phase", "phase"},
               {"what", "what"},
               {"time_s", "time_s", 3},
               {"% thread", "pct_thread", 1},
               {"ms/iter", "ms_per_iter", 3}};
  if (b.gpu)
    t.columns.insert(t.columns.end(),
                     {{"gpu_s", "gpu_s", 3}, {"gpu ms/iter", "gpu_ms_per_iter", 3}});
  t.columns.push_back({"from", "routines"});
  if (!b.found) return t;
  auto per_iter = [&](std::int64_t ns) {
    return b.iterations > 0
               ? Cell{static_cast<double>(ns) / 1e6 / static_cast<double>(b.iterations)}
               : Cell{};
  };
  auto row = [&](const std::string& id, const std::string& what, std::int64_t ns,
                 std::int64_t gpu_ns, bool known, const std::vector<std::string>& routines,
                 bool per_iteration = true) {
    Cell time, pct, iter, gpu, gpu_iter;  // NULL unless known
    if (known) {
      time = static_cast<double>(ns) / 1e9;
      if (b.threads_ns > 0)
        pct = 100.0 * static_cast<double>(ns) / static_cast<double>(b.threads_ns);
      gpu = static_cast<double>(gpu_ns) / 1e9;
      if (per_iteration) {
        iter = per_iter(ns);
        gpu_iter = per_iter(gpu_ns);
      }
    }
    std::string from;
    for (std::size_t i = 0; i < routines.size() && i < 3; ++i)
      from += (i ? ", " : "") + routines[i];
    if (routines.size() > 3) from += fmt::format(" (+{})", routines.size() - 3);
    std::vector<Cell> cells{id, what, time, pct, iter};
    if (b.gpu) cells.insert(cells.end(), {gpu, gpu_iter});
    cells.push_back(from);
    t.rows.push_back(std::move(cells));
  };
  for (const BreakdownRow& r : b.rows) row(r.id, r.title, r.time_ns, r.gpu_ns, r.known, r.routines);
  row("other", "in the iterations, in no phase", b.other_ns, b.gpu_other_ns, true, {});
  row("outside", "outside the loop (set-up, evaluation)", b.outside_ns, b.gpu_outside_ns, true, {},
      false);
  row("unmeasured", "outside any measured routine", b.unmeasured_ns, b.gpu_unseen_ns, true, {},
      false);
  return t;
}

Table breakdown_overlap_table(const Breakdown& b) {
  Table t;
  t.columns = {{"pid", "pid"},
               {"device", "device"},
               {"comm_s", "comm_s", 3},
               {"compute_s", "compute_s", 3},
               {"overlap_s", "overlap_s", 3},
               {"% comm hidden", "overlap_pct", 1},
               {"exposed ms/iter", "exposed_ms_per_iter", 3},
               {"overlap ms/iter", "overlap_ms_per_iter", 3}};
  for (const GpuOverlapRow& r : b.overlap) {
    const DeviceOverlap& o = r.time;
    auto per_iter = [&](std::int64_t ns) {
      return r.iterations > 0
                 ? Cell{static_cast<double>(ns) / 1e6 / static_cast<double>(r.iterations)}
                 : Cell{};
    };
    Cell pct =
        o.comm_ns > 0
            ? Cell{100.0 * static_cast<double>(o.overlap_ns) / static_cast<double>(o.comm_ns)}
            : Cell{};
    t.rows.push_back({r.pid, r.device >= 0 ? Cell{r.device} : Cell{},
                      static_cast<double>(o.comm_ns) / 1e9, static_cast<double>(o.compute_ns) / 1e9,
                      static_cast<double>(o.overlap_ns) / 1e9, pct,
                      per_iter(o.comm_ns - o.overlap_ns), per_iter(o.overlap_ns)});
  }
  return t;
}

Table counter_table(const CounterReport& rep, std::size_t top) {
  Table t;
  t.columns = {{"routine", "routine"}, {"kind", "kind"}, {"incl_s", "incl_s", 3}};
  for (const CounterMetric* m : rep.metrics)
    t.columns.push_back({std::string(m->title), std::string(m->key), 2});
  for (const std::string& e : rep.events) t.columns.push_back({e, e, 0});
  std::size_t n = top == 0 ? rep.routines.size() : std::min(top, rep.routines.size());
  for (std::size_t i = 0; i < n; ++i) {
    const RoutineCounters& r = rep.routines[i];
    std::vector<Cell> row{r.name, r.kind, static_cast<double>(r.incl_ns) / 1e9};
    for (const CounterMetric* m : rep.metrics) {
      auto v = metric_value(*m, r);
      row.push_back(v ? Cell{*v} : Cell{});
    }
    for (const std::string& e : rep.events) {
      auto it = r.incl.find(e);
      row.push_back(it == r.incl.end() ? Cell{} : Cell{it->second});
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

}  // namespace sonde::analyzers
