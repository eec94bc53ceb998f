// The floating-point rule of `sonde candidates` (kRules in candidates.cpp lists it): subnormal
// values where FTZ/DAZ is off, its gain estimated from the sampled share of subnormal elements.
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> subnormals(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
