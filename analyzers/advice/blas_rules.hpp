// The BLAS-build rule of `sonde candidates` (kRules in candidates.cpp lists it): an OpenBLAS
// running kernels narrower than the CPU's vectors (metrics/blas_kernels.hpp).
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> blas_kernels(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
