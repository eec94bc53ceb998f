// The rank rules of `sonde candidates` (kRules in candidates.cpp lists them): load imbalance,
// exposed communication, and collectives of small messages, from the rank views.
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> rank_imbalance(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> comm_exposed(const AdviceInput& input, const Rule& rule);
std::vector<Candidate> small_collectives(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
