#include "advice/outermost_frames.hpp"

#include <fmt/format.h>

namespace sonde::analyzers {

OutermostFrames outermost_frames(const ProfileFile& file, std::string_view routines) {
  // The nodes scanned once for the few routines named (joined from the routines, SQLite built
  // an index of every node first); their ancestors walked up to tell the nested ones.
  auto st = file.prepare(fmt::format(
      "WITH RECURSIVE chosen(routine_id) AS (SELECT routine_id FROM routines WHERE {}),"
      "marked(node_id) AS ("
      "  SELECT node_id FROM nodes WHERE routine_id IN (SELECT routine_id FROM chosen)),"
      "up(mark, node_id) AS ("
      "  SELECT m.node_id, n.parent_id FROM marked m JOIN nodes n USING (node_id)"
      "  UNION ALL"
      "  SELECT up.mark, n.parent_id FROM up JOIN nodes n ON n.node_id = up.node_id"
      "  WHERE n.parent_id IS NOT NULL),"
      "nested(node_id) AS (SELECT DISTINCT up.mark FROM up JOIN marked m USING (node_id)),"
      "outer AS ("
      "  SELECT n.incl_ns, n.calls, p.routine_id AS caller FROM marked m"
      "  JOIN nodes n USING (node_id) JOIN nodes p ON p.node_id = n.parent_id"
      "  WHERE m.node_id NOT IN (SELECT node_id FROM nested)"
      "    AND n.node_id NOT IN (SELECT node_id FROM waited_nodes))"
      "SELECT COALESCE(SUM(incl_ns), 0), COALESCE(SUM(calls), 0),"
      "  (SELECT r.name FROM outer o JOIN routines r ON r.routine_id = o.caller"
      "   GROUP BY o.caller ORDER BY SUM(o.incl_ns) DESC LIMIT 1) FROM outer",
      routines));
  OutermostFrames f;
  if (st.step()) {
    f.ns = st.int64(0);
    f.calls = st.int64(1);
    if (!st.is_null(2)) f.caller = st.text(2);
  }
  return f;
}

}  // namespace sonde::analyzers
