// The thread-count rules of `sonde candidates` (kRules in candidates.cpp lists them): the BLAS
// on fewer threads than the cores (blas-threads), and torch's own intra-op pool on fewer
// (framework-threads), each with the gain more threads could give at best.
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> blas_threads(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> framework_threads(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
