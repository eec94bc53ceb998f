// Peak rates (GEMM GFLOP/s, memory GB/s) from `sonde calibrate` or a datasheet, copied into
// each profile so that % of peak can be computed from the file alone.
#pragma once

#include <string>
#include <vector>

namespace sonde {

struct Peak {
  std::string resource;  // gemm.f32, gemm.f64, mem.bw
  int threads = 0;       // 0 = all threads, 1 = one
  double value = 0;
  std::string source;    // calibrated, manual
};

// Lines `resource threads value source`, '#' comments. A missing file is no peaks; malformed
// lines are skipped and counted in `bad_lines`.
std::vector<Peak> read_peaks(const std::string& path, int& bad_lines);

}  // namespace sonde
