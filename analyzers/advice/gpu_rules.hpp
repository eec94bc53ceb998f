// The GPU rules of `sonde candidates` (kRules in candidates.cpp lists them): copies,
// synchronisation, launch overhead, and kernels ranked by time x inefficiency as in TAU.
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> gpu_copies(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> gpu_syncs(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> gpu_launches(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> gpu_kernels(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
