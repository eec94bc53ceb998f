// The data `sonde view` shows: the analyzers' JSON for each profile, under one format version.
// (Placeholder with the agreed signature; the viewer's own bundle replaces it.)
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace sonde::analyzers {

// {"format_version": 1, "profiles": [...]}, one entry per profile, in the order given.
// Throws Error when a profile cannot be read.
nlohmann::json make_view_bundle(const std::vector<std::string>& profiles);

}  // namespace sonde::analyzers
