// What the GPU rules of `sonde candidates` read: kernels and copies from gpu_activity (CUPTI),
// and the CPU-side CUDA API routines (copies, synchronisation, launches) from the call trees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct GpuKernel {
  std::string name;
  std::int64_t calls = 0;
  std::int64_t time_ns = 0;
  // The figures of gpu_kernel_totals (docs/schema.md): grid (blocks) and block (threads per
  // block) and registers of the longest launch; launch_configs, the distinct grid x block
  // configurations of its launches (1: all alike).
  std::int64_t grid = 0, block = 0, launch_configs = 0;
  std::int64_t registers = 0;
  // SONDE_GPU_METRICS, over the launches whose metrics were recorded (metric_launches of them,
  // metric_time_ns of kernel time): TAU's warps per instruction and global loads per
  // instruction, and the speed-of-light throughputs in % of peak (time-weighted means).
  std::int64_t metric_launches = 0;
  std::int64_t metric_time_ns = 0;
  std::optional<double> warps_per_inst, gld_per_inst, sm_pct, memory_pct;
};

// TAU's tuning-candidate ranking: warps per instruction x time (s) where recorded, so a kernel
// is first when it is both long and inefficient; its time alone otherwise.
double tau_score(const GpuKernel& k);
// `kernels`, best candidate first: those with warps per instruction by tau_score, then the
// others by time (the two scores are in different units and are not compared).
std::vector<const GpuKernel*> rank_kernels_as_tau(const std::vector<GpuKernel>& kernels);

// CPU-side CUDA API time of one group of routines (kind cuda, by routines.role).
struct ApiTotals {
  std::int64_t calls = 0;
  std::int64_t time_ns = 0;
  double bytes = 0;
};

// Work CUDA graphs replayed, by where its graph nodes were created (gpu_graph_kernels).
struct GraphReplay {
  std::string kind, name;                // 'kernel', 'memcpy', 'memset'; the kernel's name
  std::string captured_at, replayed_by;  // call paths; replayed_by empty: a replay not seen
  std::int64_t records = 0;
  std::int64_t time_ns = 0;
};

struct GpuSummary {
  std::vector<GpuKernel> kernels;  // by time, largest first
  std::int64_t kernel_ns = 0;      // Σ kernel durations
  std::int64_t copy_ns = 0;        // Σ memcpy activity durations (device side)
  double copy_bytes = 0;
  ApiTotals copies;                 // role 'copy': between host and device
  ApiTotals syncs;                  // role 'sync'
  ApiTotals launches;               // role 'launch'
  std::vector<GraphReplay> graphs;  // by time, largest first
  bool any() const { return !kernels.empty() || copies.calls || syncs.calls || launches.calls; }
};

GpuSummary load_gpu_summary(const ProfileFile& file);

}  // namespace sonde::analyzers
