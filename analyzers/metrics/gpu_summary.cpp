#include "metrics/gpu_summary.hpp"

#include <algorithm>
#include <cmath>

namespace sonde::analyzers {

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

GpuSummary load_gpu_summary(const ProfileFile& file) {
  GpuSummary g;
  // Without a row of GPU work there is nothing to read, and gpu_kernel_totals would still walk
  // every node's path (node_paths) to find none: 7 % of a 100k-node view bundle.
  if (file.has_table("gpu_activity") && file.has_rows("gpu_activity")) {
    // Every figure of a kernel is gpu_kernel_totals' (store_views.sql), read as it is.
    auto st = file.prepare(
        "SELECT kernel, calls, time_s, grid, block, launch_configs, registers, metric_launches, "
        "metric_time_s, warps_per_inst, gld_per_inst, sm_pct_peak, memory_pct_peak "
        "FROM gpu_kernel_totals");
    auto opt = [&](int col) -> std::optional<double> {
      if (st.is_null(col)) return std::nullopt;
      return st.real(col);
    };
    while (st.step()) {
      GpuKernel k;
      k.name = st.text(0);
      k.calls = st.int64(1);
      k.time_ns = std::llround(st.real(2) * 1e9);
      k.grid = st.int64(3);
      k.block = st.int64(4);
      k.launch_configs = st.int64(5);
      k.registers = st.is_null(6) ? 0 : st.int64(6);
      k.metric_launches = st.int64(7);
      k.metric_time_ns = std::llround(st.real(8) * 1e9);
      k.warps_per_inst = opt(9);
      k.gld_per_inst = opt(10);
      k.sm_pct = opt(11);
      k.memory_pct = opt(12);
      g.kernel_ns += k.time_ns;
      g.kernels.push_back(std::move(k));
    }
    auto cp = file.prepare(
        "SELECT COALESCE(SUM(end_ns - start_ns), 0), COALESCE(SUM(bytes), 0) "
        "FROM gpu_activity WHERE kind = 'memcpy'");
    if (cp.step()) {
      g.copy_ns = cp.int64(0);
      g.copy_bytes = cp.real(1);
    }
  }
  // Files before version 6 have the view as a temporary one, always empty.
  if (file.has_rows("gpu_graph_kernels")) {
    auto st = file.prepare(
        "SELECT kind, name, origin_path, COALESCE(call_path, ''), records, time_s "
        "FROM gpu_graph_kernels ORDER BY time_s DESC, origin_path, name");
    while (st.step()) {
      g.graphs.push_back({st.text(0), st.text(1), st.text(2), st.text(3), st.int64(4),
                          std::llround(st.real(5) * 1e9)});
    }
  }
  std::stable_sort(g.kernels.begin(), g.kernels.end(),
                   [](const GpuKernel& a, const GpuKernel& b) { return a.time_ns > b.time_ns; });
  // Non-recursive nodes, so a copy inside a copy (a runtime call reaching the driver) counts once.
  // (A file without CUDA routines has none: its million nodes are not scanned to find that.)
  auto cuda = file.prepare("SELECT EXISTS (SELECT 1 FROM routines WHERE kind = 'cuda')");
  if (!cuda.step() || cuda.int64(0) == 0) return g;
  // The role is the wrapper table's (routines.role; guessed from the name in a file before
  // version 9, by the reader's view of it).
  auto api = file.prepare(
      "SELECT r.role, SUM(n.calls), SUM(n.incl_ns), SUM(n.bytes) FROM nodes n "
      "JOIN routines r USING (routine_id) WHERE r.kind = 'cuda' "
      "AND r.role IN ('copy', 'sync', 'launch') AND NOT EXISTS ("
      "  SELECT 1 FROM nodes p JOIN routines pr USING (routine_id) "
      "  WHERE p.node_id = n.parent_id AND pr.kind = 'cuda') GROUP BY r.role");
  while (api.step()) {
    std::string role = api.text(0);
    ApiTotals* into = role == "copy" ? &g.copies : role == "sync" ? &g.syncs : &g.launches;
    into->calls += api.int64(1);
    into->time_ns += api.int64(2);
    into->bytes += api.real(3);
  }
  return g;
}

}  // namespace sonde::analyzers
