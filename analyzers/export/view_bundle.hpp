// The data of `sonde view`: one JSON document with what the analyzers compute for each profile
// (the same functions as the subcommands' --format json), which the browser viewer only shows.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace sonde::analyzers {

// Bumped when a member the viewer reads changes meaning or goes away.
inline constexpr int kViewBundleFormat = 1;

// Frames under this % of their tree's total are folded into one "(N more)" entry per parent
// (`sonde tree --min-pct 0` lists them): 1e-4 of the total is a pixel at 8x zoom. The benchmark's
// random 1M-path tree keeps 76k frames (19 MB of JSON) at 0.01 %, 252k (63 MB) at 0.001 %.
inline constexpr double kViewTreeMinPct = 0.01;

// {"format_version": 1, "profiles": [...], "diff": ...}: one entry per file, in order, and the
// diff of the first against the second when there are two. Throws Error for an unreadable file.
// Strings that are not UTF-8 come out with U+FFFD, so any json dump of it succeeds.
nlohmann::json make_view_bundle(const std::vector<std::string>& profiles);

}  // namespace sonde::analyzers
