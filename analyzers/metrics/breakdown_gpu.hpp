// The device side of the iteration breakdown. Chu's deck defines the phases on the GPU; with
// asynchronous CUDA the host's phases are launch times and the GPU's work is charged wherever
// the host blocks. Here each phase gets the device time of the work launched under it (a
// gpu_activity row's node_id is the launching call path; breakdown.cpp decides each node's
// phase), and each device the overlap of its NCCL kernels with its compute kernels.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "metrics/breakdown.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// The nodes of the training loops' iterations, each with the phase the host breakdown gave it.
struct LoopNodes {
  static constexpr int kOther = kPhaseCount;  // in the iterations, in no phase
  // A node of PyTorch's autograd device thread (pt_autograd_N), which runs every backward op on
  // a CUDA device and so launches its kernels, DDP's NCCL all-reduces among them, from no frame
  // of the loop: its work is t_b where it ran within the device time of the work launched in
  // its process's iterations, outside otherwise (a warm-up backward, an evaluation's).
  static constexpr int kAutograd = kPhaseCount + 1;
  // node_id -> Phase, kOther or kAutograd; absent: outside
  std::unordered_map<std::int64_t, int> phase;
  std::unordered_map<std::int64_t, std::int64_t> iterations;  // thread_id -> its loop's
};

// Fills b.gpu, the rows' gpu_ns, gpu_other/outside/unseen_ns and b.overlap from gpu_work; does
// nothing for a file without GPU activity.
void add_device_time(const ProfileFile& file, const LoopNodes& loop, Breakdown& b);

}  // namespace sonde::analyzers
