// The precision rule of `sonde candidates` (kRules in candidates.cpp lists it): GEMMs in float64
// where float32 may do, their gain from the calibrated peaks of both.
#pragma once

#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

std::vector<Candidate> float64_gemms(const AdviceInput& input, const Rule& rule);

}  // namespace sonde::analyzers
