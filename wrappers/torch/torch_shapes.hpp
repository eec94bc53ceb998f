// `--record-shapes` (SONDE_TORCH_SHAPES=1): a top-level operator's input signature, the shapes
// and dtypes of its inputs as torch.profiler's record_shapes shows them, read through libtorch's
// own inputSizes and inputTypes (they need the callback's needs_inputs, which makes libtorch
// copy every operator's inputs: the cost of torch.profiler's record_shapes, so it is opt-in).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "torch_abi.hpp"

namespace sonde::torch_ops {

extern std::atomic<bool> g_record_shapes;

// "[[64, 1, 28, 28], [32, 1, 3, 3], [32], []]": Python's repr of torch.profiler's input_shapes.
std::string shapes_text(const std::vector<std::vector<int64_t>>& sizes);
// "float, float, Scalar": inputTypes' names joined.
std::string dtypes_text(const std::vector<std::string>& types);

// The signature id of this event's inputs (core/op_signatures.hpp); 0 when it cannot be read.
uint32_t signature_of(const torch_abi::RecordFunction& rf);

}  // namespace sonde::torch_ops
