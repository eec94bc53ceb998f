// `sonde shapes --operators`: PyTorch operators per input signature and caller, from the
// `operator_shapes` view (`--record-shapes`), as torch.profiler's
// key_averages(group_by_input_shape=True) with the calling frame beside.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "metrics/operator_flops.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct OpShapeRow {
  std::string op, input_shapes, input_dtypes, caller;
  std::int64_t calls = 0;
  double time_s = 0;
  std::optional<double> mean_us;
  std::optional<OperatorFlops> flops;  // all its calls', for a GEMM operator
};

// Sorted by time, largest first; top = 0 means all. Empty for a file without op_shapes
// (written before schema version 6).
std::vector<OpShapeRow> compute_op_shapes(const ProfileFile& file, std::size_t top = 0);
// Distinct input signatures in op_shapes, 0 for a file without the table.
std::int64_t count_op_shapes(const ProfileFile& file);
Table op_shapes_table(const std::vector<OpShapeRow>& rows);

}  // namespace sonde::analyzers
