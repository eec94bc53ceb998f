#include "metrics/gpu_summary.hpp"

#include <algorithm>

namespace sonde::analyzers {

namespace {
std::optional<double> ratio(const std::map<std::string, double>& sums, const char* num,
                            const char* den) {
  auto n = sums.find(num), d = sums.find(den);
  if (n == sums.end() || d == sums.end() || d->second <= 0) return std::nullopt;
  return n->second / d->second;
}

std::optional<double> mean_of(const std::map<std::string, double>& means,
                              std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (auto it = means.find(name); it != means.end()) return it->second;
  return std::nullopt;
}
}  // namespace

void derive_kernel_metrics(GpuKernel& k) {
  k.warps_per_inst = ratio(k.metric_sum, "smsp__warps_launched.sum", "smsp__inst_executed.sum");
  k.gld_per_inst =
      ratio(k.metric_sum, "smsp__inst_executed_op_global_ld.sum", "smsp__inst_executed.sum");
  k.sm_pct = mean_of(k.metric_mean, {"sm__throughput.avg.pct_of_peak_sustained_elapsed"});
  k.memory_pct =
      mean_of(k.metric_mean, {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                              "dram__throughput.avg.pct_of_peak_sustained_elapsed"});
}

double tau_score(const GpuKernel& k) {
  double time_s = static_cast<double>(k.time_ns) / 1e9;
  return k.warps_per_inst ? *k.warps_per_inst * time_s : time_s;
}

std::vector<const GpuKernel*> rank_kernels_as_tau(const std::vector<GpuKernel>& kernels) {
  std::vector<const GpuKernel*> ranked;
  for (const GpuKernel& k : kernels) ranked.push_back(&k);
  std::stable_sort(ranked.begin(), ranked.end(), [](const GpuKernel* a, const GpuKernel* b) {
    if (a->warps_per_inst.has_value() != b->warps_per_inst.has_value()) {
      return a->warps_per_inst.has_value();
    }
    return tau_score(*a) > tau_score(*b);
  });
  return ranked;
}

namespace {
void load_kernel_metrics(const ProfileFile& file, std::vector<GpuKernel>& kernels) {
  std::map<std::string, GpuKernel*> by_name;
  for (GpuKernel& k : kernels) by_name[k.name] = &k;
  auto launches = file.prepare(
      "SELECT g.name, COUNT(*), SUM(g.end_ns - g.start_ns) FROM gpu_activity g "
      "WHERE g.kind = 'kernel' AND EXISTS (SELECT 1 FROM gpu_metrics m "
      "WHERE m.activity_id = g.activity_id) GROUP BY g.name");
  while (launches.step()) {
    if (auto it = by_name.find(launches.text(0)); it != by_name.end()) {
      it->second->metric_launches = launches.int64(1);
      it->second->metric_time_ns = launches.int64(2);
    }
  }
  auto st = file.prepare(
      "SELECT g.name, m.metric, SUM(m.value), SUM(m.value * (g.end_ns - g.start_ns)), "
      "SUM(g.end_ns - g.start_ns), AVG(m.value) FROM gpu_metrics m "
      "JOIN gpu_activity g USING (activity_id) WHERE g.kind = 'kernel' GROUP BY g.name, m.metric");
  while (st.step()) {
    auto it = by_name.find(st.text(0));
    if (it == by_name.end()) continue;
    GpuKernel& k = *it->second;
    std::string metric = st.text(1);
    k.metric_sum[metric] = st.real(2);
    std::int64_t time = st.int64(4);
    k.metric_mean[metric] = time > 0 ? st.real(3) / static_cast<double>(time) : st.real(5);
  }
  for (GpuKernel& k : kernels) derive_kernel_metrics(k);
}
}  // namespace

GpuSummary load_gpu_summary(const ProfileFile& file) {
  GpuSummary g;
  if (file.has_table("gpu_activity")) {
    auto st = file.prepare(
        "SELECT name, COUNT(*), SUM(end_ns - start_ns), "
        "MAX(COALESCE(grid_x, 1) * COALESCE(grid_y, 1) * COALESCE(grid_z, 1)), "
        "MAX(COALESCE(block_x, 1) * COALESCE(block_y, 1) * COALESCE(block_z, 1)), "
        "MAX(COALESCE(registers, 0)) FROM gpu_activity WHERE kind = 'kernel' GROUP BY name");
    while (st.step()) {
      GpuKernel k{st.text(0), st.int64(1), st.int64(2), st.int64(3), st.int64(4), st.int64(5)};
      g.kernel_ns += k.time_ns;
      g.kernels.push_back(std::move(k));
    }
    if (file.has_table("gpu_metrics")) load_kernel_metrics(file, g.kernels);
    auto cp = file.prepare(
        "SELECT COALESCE(SUM(end_ns - start_ns), 0), COALESCE(SUM(bytes), 0) "
        "FROM gpu_activity WHERE kind = 'memcpy'");
    if (cp.step()) {
      g.copy_ns = cp.int64(0);
      g.copy_bytes = cp.real(1);
    }
  }
  std::stable_sort(g.kernels.begin(), g.kernels.end(),
                   [](const GpuKernel& a, const GpuKernel& b) { return a.time_ns > b.time_ns; });
  // Non-recursive nodes, so a copy inside a copy (a runtime call reaching the driver) counts once.
  auto api = file.prepare(
      "SELECT r.name, SUM(n.calls), SUM(n.incl_ns), SUM(n.bytes) FROM nodes n "
      "JOIN routines r USING (routine_id) WHERE r.kind = 'cuda' AND NOT EXISTS ("
      "  SELECT 1 FROM nodes p JOIN routines pr USING (routine_id) "
      "  WHERE p.node_id = n.parent_id AND pr.kind = 'cuda') GROUP BY r.name");
  while (api.step()) {
    std::string name = api.text(0);
    ApiTotals* into = nullptr;
    if (name.find("HtoD") != std::string::npos || name.find("DtoH") != std::string::npos)
      into = &g.copies;
    else if (name.find("Synchronize") != std::string::npos)
      into = &g.syncs;
    else if (name.find("Launch") != std::string::npos)
      into = &g.launches;
    if (into == nullptr) continue;
    into->calls += api.int64(1);
    into->time_ns += api.int64(2);
    into->bytes += api.real(3);
  }
  return g;
}

}  // namespace sonde::analyzers
