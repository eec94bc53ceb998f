// The torch-operator rule of `sonde candidates` (kRules in candidates.cpp lists it): one ATen
// operator whose own time, outside any BLAS or oneDNN call beneath it, is a large share of the
// run. The GEMM, convolution and update rules name what they know; an element-wise, reduction
// or random operator was named by none (a red-team Transformer spent 39 % of its run in
// aten::dropout, and no rule fired).
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> torch_operator(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
