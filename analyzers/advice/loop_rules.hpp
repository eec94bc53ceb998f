// The loop rule of `sonde candidates` (kRules in candidates.cpp lists it): a Python function of
// the program's own calling torch operators or numpy functions of microseconds each, thousands
// of times a call, whose time is dispatch and interpretation rather than arithmetic; and
// matrix-vector products made one vector at a time.
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> python_loop(const AdviceInput& input, const Rule& rule);
// BLAS matrix-vector products called one vector at a time from one caller.
std::vector<Candidate> batch_matrix_vector(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
