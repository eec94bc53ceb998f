#include "metrics/counter_metrics.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>

namespace sonde::analyzers {
namespace {

constexpr EventPair kIpc[] = {
    {"PAPI_TOT_INS", "PAPI_TOT_CYC"},
    {"perf::INSTRUCTIONS", "perf::CPU-CYCLES"},
    {"perf::INSTRUCTIONS", "perf::CYCLES"},
    {"perf::PERF_COUNT_HW_INSTRUCTIONS", "perf::PERF_COUNT_HW_CPU_CYCLES"}};
constexpr EventPair kL1[] = {{"PAPI_L1_DCM", "PAPI_L1_DCA"},
                             {"perf::L1-DCACHE-LOAD-MISSES", "perf::L1-DCACHE-LOADS"}};
constexpr EventPair kL2[] = {{"PAPI_L2_DCM", "PAPI_L2_DCA"}, {"PAPI_L2_TCM", "PAPI_L2_TCA"}};
constexpr EventPair kLlc[] = {{"PAPI_L3_TCM", "PAPI_L3_TCA"},
                              {"perf::LLC-LOAD-MISSES", "perf::LLC-LOADS"},
                              {"perf::CACHE-MISSES", "perf::CACHE-REFERENCES"}};
constexpr EventPair kFlops[] = {{"PAPI_FP_OPS", ""}, {"PAPI_SP_OPS", ""}, {"PAPI_DP_OPS", ""}};
// perf's task clock counts the thread's CPU time in ns: against wall time it says how much of a
// routine was spent running rather than waiting (I/O, locks, sleeping, a GPU).
constexpr EventPair kBusy[] = {{"perf::TASK-CLOCK", ""}};
constexpr EventPair kFaults[] = {{"perf::PAGE-FAULTS", ""},
                                 {"perf::PERF_COUNT_SW_PAGE_FAULTS", ""}};
constexpr EventPair kSwitches[] = {{"perf::CONTEXT-SWITCHES", ""},
                                   {"perf::PERF_COUNT_SW_CONTEXT_SWITCHES", ""}};

const std::array<CounterMetric, 8> kMetrics{{
    {"ipc", "IPC", 1.0, kIpc},
    {"l1d_miss_pct", "L1D miss %", 100.0, kL1},
    {"l2_miss_pct", "L2 miss %", 100.0, kL2},
    {"llc_miss_pct", "LLC miss %", 100.0, kLlc},
    {"hw_gflops", "HW GFLOP/s", 1e-9, kFlops},
    {"cpu_busy_pct", "CPU busy %", 100.0 / 1e9, kBusy},
    {"page_faults_per_s", "faults/s", 1.0, kFaults},
    {"ctx_switches_per_s", "switches/s", 1.0, kSwitches},
}};

const EventPair* usable_pair(const CounterMetric& m, const std::set<std::string>& have) {
  for (const EventPair& p : m.sources) {
    if (!have.count(std::string(p.numerator))) continue;
    if (!p.denominator.empty() && !have.count(std::string(p.denominator))) continue;
    return &p;
  }
  return nullptr;
}

}  // namespace

std::span<const CounterMetric> counter_metrics() { return kMetrics; }

std::optional<double> metric_value(const CounterMetric& metric, const RoutineCounters& r) {
  std::set<std::string> have;
  for (const auto& [name, v] : r.incl) have.insert(name);
  const EventPair* p = usable_pair(metric, have);
  if (p == nullptr) return std::nullopt;
  double num = r.incl.at(std::string(p->numerator));
  double den = p->denominator.empty() ? static_cast<double>(r.incl_ns) / 1e9
                                      : r.incl.at(std::string(p->denominator));
  if (den <= 0) return std::nullopt;
  return metric.scale * num / den;
}

CounterReport compute_counter_report(const ProfileFile& file) {
  CounterReport rep;
  if (!file.has_table("node_counters")) return rep;
  std::set<std::string> have;
  {
    auto st = file.prepare(
        "SELECT DISTINCT c.name FROM counters c JOIN node_counters nc "
        "USING (counter_id) ORDER BY c.name");
    while (st.step()) {
      rep.events.push_back(st.text(0));
      have.insert(st.text(0));
    }
  }
  if (rep.events.empty()) return rep;
  for (const CounterMetric& m : kMetrics)
    if (usable_pair(m, have)) rep.metrics.push_back(&m);

  // Per routine identity (routine_id), never per display name: two routines of one name are
  // two codes. The time is the hotspots view's incl_s (recursive nodes left out); the counts
  // skip recursive nodes the same way (their ancestor already holds them).
  std::map<std::int64_t, RoutineCounters> by;
  {
    auto st = file.prepare(
        "SELECT routine_id, routine, kind, incl_s FROM hotspots "
        "WHERE kind <> 'root'");
    while (st.step()) {
      RoutineCounters& rc = by[st.int64(0)];
      rc.name = st.text(1);
      rc.kind = st.text(2);
      rc.incl_ns = std::llround(st.real(3) * 1e9);
    }
  }
  {
    auto st = file.prepare(
        "SELECT n.routine_id, c.name, SUM(CASE WHEN n.recursive = 0 THEN nc.incl ELSE 0 END), "
        "SUM(nc.excl) FROM node_counters nc JOIN nodes n USING (node_id) "
        "JOIN counters c USING (counter_id) WHERE n.depth > 0 GROUP BY n.routine_id, c.name");
    while (st.step()) {
      auto it = by.find(st.int64(0));
      if (it == by.end()) continue;
      it->second.incl[st.text(1)] = st.real(2);
      it->second.excl[st.text(1)] = st.real(3);
    }
  }
  for (auto& [key, rc] : by)
    if (!rc.incl.empty()) rep.routines.push_back(std::move(rc));
  std::stable_sort(
      rep.routines.begin(), rep.routines.end(),
      [](const RoutineCounters& a, const RoutineCounters& b) { return a.incl_ns > b.incl_ns; });
  return rep;
}

}  // namespace sonde::analyzers
