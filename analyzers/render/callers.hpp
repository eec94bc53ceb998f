// `sonde tree --callers/--callees ROUTINE`: a routine's callers (read upward) or callees, as
// text, CSV rows or JSON; the viewer's callers panel takes the JSON of both.
#pragma once

#include <string>

#include "base/table_format.hpp"
#include "profile/callers.hpp"
#include "profile/hotspots.hpp"
#include "render/tree.hpp"

namespace sonde::analyzers {

enum class SandwichSide { kCallers, kCallees };

// A header naming the routine with its hotspots figures (`row`, its incl_pct of the busy
// threads' time), then the tree; percentages are of the routine's inclusive time.
std::string render_sandwich_text(const Sandwich& s, const HotspotRow& row, SandwichSide side,
                                 const TreeOptions& options);
// tree_table's columns; `path` runs from the routine up its callers (or down its callees).
Table sandwich_table(const Sandwich& s, SandwichSide side, const TreeOptions& options);
// {"routine": {routine_id, name, kind, where, calls, incl_s, excl_s, incl_pct},
//  "denominator", "min_pct", "max_depth", "callers": <node>, "callees": <node>} with the nodes
// as `sonde tree --format json` writes them; `side` alone, or both when null.
Json render_sandwich_json(const Sandwich& s, const HotspotRow& row, const TreeOptions& options,
                          const SandwichSide* side = nullptr);

}  // namespace sonde::analyzers
