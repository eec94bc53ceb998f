// A PyTorch GEMM operator's FLOPs from its recorded input shapes (`--record-shapes`): what
// gives its GFLOP/s where sonde sees no BLAS or oneDNN call beneath it (pip wheels link MKL and
// oneDNN into libtorch_cpu.so) and what torch.profiler's with_flops counts. One definition,
// read by `sonde shapes --operators` and the torch-operator rule.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// FLOPs of one call: 2·M·K·N per product, as torch.profiler counts aten::mm, addmm, bmm and
// baddbmm, and the same for aten::linear, matmul, mv, addmv and addbmm, from the shapes the
// operator_shapes view holds (`[[64, 784], [784, 128]]`, one list per input). nullopt for any
// other operator (a convolution's FLOPs need its stride and padding, which are not recorded),
// for shapes that do not multiply, and for inputs that are not floating point (`float`,
// `double`, `c10::Half`, `c10::BFloat16`).
std::optional<double> operator_call_flops(std::string_view op, std::string_view input_shapes,
                                          std::string_view input_dtypes);

// One operator's FLOP-counted calls over the run, every call path and signature.
struct OperatorFlops {
  double flops = 0;
  std::int64_t calls = 0;  // the calls counted
  double time_s = 0;       // their inclusive time
  // GFLOP/s over that time; nullopt without it.
  std::optional<double> gflops() const {
    return time_s > 0 ? std::optional<double>(flops / time_s / 1e9) : std::nullopt;
  }
};

// Per routine_id, for the operators with at least one counted call; empty for a file without
// op_shapes (no --record-shapes, or written before schema version 6).
std::map<std::int64_t, OperatorFlops> load_operator_flops(const ProfileFile& file);

}  // namespace sonde::analyzers
