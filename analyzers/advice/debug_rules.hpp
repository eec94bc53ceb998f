// The anomaly-mode and torch-profiler rules of `sonde candidates` (kRules in candidates.cpp
// lists them): PyTorch's debugging aids left on in the run (advice/debug_tools.hpp).
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> anomaly_mode(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> torch_profiler(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> module_hooks(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
