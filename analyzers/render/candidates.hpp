// sonde candidates' text, JSON and table over what the advice rules found (advice/candidates.hpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "advice/candidates.hpp"
#include "base/table_format.hpp"

namespace sonde::analyzers {

// top = 0: all.
std::string render_candidates_text(const std::vector<Candidate>& candidates, std::size_t top);
Json render_candidates_json(const std::vector<Candidate>& candidates, std::size_t top);
// One row per candidate, best first: rank, rule, location, est_gain_s, summary, advice, and the
// evidence as one JSON object (its members differ by rule).
Table candidates_table(const std::vector<Candidate>& candidates, std::size_t top);

}  // namespace sonde::analyzers
