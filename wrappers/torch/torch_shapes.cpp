#include "torch_shapes.hpp"

#include "sonde/probe.hpp"
#include "torch_observer.hpp"

namespace sonde::torch_ops {

std::atomic<bool> g_record_shapes{false};

std::string shapes_text(const std::vector<std::vector<int64_t>>& sizes) {
  std::string out = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    out += '[';
    for (size_t j = 0; j < sizes[i].size(); ++j) {
      if (j > 0) out += ", ";
      out += std::to_string(sizes[i][j]);
    }
    out += ']';
  }
  out += ']';
  return out;
}

std::string dtypes_text(const std::vector<std::string>& types) {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i > 0) out += ", ";
    out += types[i];
  }
  return out;
}

uint32_t signature_of(const torch_abi::RecordFunction& rf) {
  if (g_reader.input_sizes == nullptr) return 0;
  try {
    // Unflattened: one entry per input, as torch.profiler's input_shapes (a tensor list is one
    // entry, []), so that shapes and dtypes line up.
    auto sizes = g_reader.input_sizes(rf, false);
    // No inputs (autograd's evaluate_function ranges are FUNCTION events too): no signature.
    if (sizes.empty()) return 0;
    std::string shapes = shapes_text(sizes);
    std::string dtypes =
        g_reader.input_types != nullptr ? dtypes_text(g_reader.input_types(rf)) : std::string();
    return probe_op_signature(shapes, dtypes);
  } catch (...) {  // an allocation failure in libtorch's helpers: no signature, never the host's
    return 0;
  }
}

}  // namespace sonde::torch_ops
