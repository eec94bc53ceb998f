// The thread-count rules of `sonde candidates` (kRules in candidates.cpp lists them): the BLAS
// on fewer threads than the cores (blas-threads), and torch's own intra-op pool on fewer
// (framework-threads), each with the gain more threads could give at best; and more threads
// than the cores other programs leave (threads-contended), with the gain of fewer.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

// The cores left to one process's thread pools beside its DataLoader workers: the cores
// (one rank's share) less the workers busy at once (those alive together, each busy the share
// of its life its fetches took), rounded to the nearest; at least 1. nullopt where no worker
// fetched.
std::optional<std::int64_t> cores_beside_workers(const AdviceInput& input);

std::vector<Candidate> blas_threads(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> framework_threads(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> threads_contended(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
