#include "render/callers.hpp"

#include <fmt/format.h>

namespace sonde::analyzers {
namespace {

const CallNode& tree_of(const Sandwich& s, SandwichSide side) {
  return side == SandwichSide::kCallers ? s.callers : s.callees;
}

// Sorted copies: the largest caller (or callee) first at every level, as `sonde tree`.
CallNode sorted(const CallNode& node) {
  CallNode copy = node;
  sort_by_inclusive(copy);
  return copy;
}

std::string where_of(const HotspotRow& row) {
  return row.file.empty() ? row.library : fmt::format("{}:{}", row.file, row.line);
}

}  // namespace

std::string render_sandwich_text(const Sandwich& s, const HotspotRow& row, SandwichSide side,
                                 const TreeOptions& options) {
  std::string where = where_of(row);
  std::string out = fmt::format(
      "{} of {} [{}]{}: {} call{}, {:.3f} s inclusive = 100 % ({:.1f} % of the busy threads' "
      "time), {:.3f} s exclusive\n",
      side == SandwichSide::kCallers ? "callers" : "callees", visible(row.name), row.kind,
      where.empty() ? "" : " " + visible(where), row.calls, row.calls == 1 ? "" : "s",
      static_cast<double>(row.incl_ns) / 1e9, row.pct_time, static_cast<double>(row.excl_ns) / 1e9);
  CallNode tree = sorted(tree_of(s, side));
  out += render_node_text(tree, s.callers.incl_ns, options);
  if (side == SandwichSide::kCallers)
    out += fmt::format(
        "each caller's line: the calls and time of {} that came through it (read upward: the "
        "line below a caller is its caller, a routine shown once a chain); a recursive call "
        "counts with its outermost one\n",
        visible(row.name));
  else
    out +=
        "the calls below the routine's outermost calls, merged; its recursive calls are "
        "among them\n";
  return out;
}

Table sandwich_table(const Sandwich& s, SandwichSide side, const TreeOptions& options) {
  Table t = node_table(sorted(tree_of(s, side)), s.callers.incl_ns, options);
  // The routine starts each path (a thread's tree leaves its root out of its paths).
  for (auto& row : t.rows) {
    auto& path = std::get<std::string>(row[3]);
    path = path.empty() ? s.callers.name.str() : s.callers.name.str() + ";" + path;
  }
  return t;
}

Json render_sandwich_json(const Sandwich& s, const HotspotRow& row, const TreeOptions& options,
                          const SandwichSide* side) {
  Json out{{"routine", Json{{"routine_id", row.routine_id},
                            {"name", row.name},
                            {"kind", row.kind},
                            {"where", where_of(row)},
                            {"calls", row.calls},
                            {"incl_s", static_cast<double>(row.incl_ns) / 1e9},
                            {"excl_s", static_cast<double>(row.excl_ns) / 1e9},
                            {"incl_pct", row.pct_time}}},
           {"denominator", "the routine's inclusive time"},
           {"min_pct", options.min_pct},
           {"max_depth", options.max_depth ? Json(*options.max_depth) : Json(nullptr)}};
  for (SandwichSide each : {SandwichSide::kCallers, SandwichSide::kCallees})
    if (!side || *side == each)
      out[each == SandwichSide::kCallers ? "callers" : "callees"] =
          render_node_json(sorted(tree_of(s, each)), s.callers.incl_ns, options);
  return out;
}

}  // namespace sonde::analyzers
