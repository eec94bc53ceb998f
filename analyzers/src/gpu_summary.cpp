#include "sonde/analyzers/gpu_summary.hpp"

#include <algorithm>

namespace sonde::analyzers {

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
    auto cp = file.prepare("SELECT COALESCE(SUM(end_ns - start_ns), 0), COALESCE(SUM(bytes), 0) "
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
