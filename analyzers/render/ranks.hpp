// sonde ranks' text and JSON: the sections compute_ranks read (metrics/ranks.hpp), a table each.
#pragma once

#include <string>

#include "base/table_format.hpp"
#include "metrics/ranks.hpp"

namespace sonde::analyzers {

std::string render_ranks_text(const RanksReport& report);
Json render_ranks_json(const std::string& path, const RanksReport& report);

}  // namespace sonde::analyzers
