// `sonde shapes`: GEMM-like calls per shape and call site, from the `gemm_shapes` view.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct ShapeRow {
  std::int64_t routine_id = 0;  // gemm_shapes groups by it: one name can be two routines
  std::string routine;
  std::string call_site;
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype;
  std::int64_t calls = 0;
  double time_s = 0;
  std::optional<double> gflops;    // achieved GFLOP/s (flops / time in ns)
  std::optional<double> pct_peak;  // vs calibrated peak; none without a peak
};

// Sorted by time, largest first; top = 0 means all.
std::vector<ShapeRow> compute_shapes(const ProfileFile& file, std::size_t top = 0);
Table shapes_table(const std::vector<ShapeRow>& rows);

}  // namespace sonde::analyzers
