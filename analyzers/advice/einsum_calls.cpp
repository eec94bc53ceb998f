#include "advice/einsum_calls.hpp"

namespace sonde::analyzers {

EinsumCalls load_einsum_calls(const ProfileFile& file) {
  EinsumCalls out;
  // Only where the file has an einsum frame: the nodes are then read by their routine's id.
  constexpr const char* kSql =
      "WITH e AS (SELECT routine_id FROM routines WHERE kind = 'python'"
      "    AND file LIKE '%einsumfunc.py' AND name LIKE '%(einsum)'),"
      "k AS (SELECT c.parent_id AS node_id, c.incl_ns AS incl_ns, rc.name AS name"
      "    FROM nodes p CROSS JOIN nodes c ON c.parent_id = p.node_id"
      "    JOIN routines rc ON rc.routine_id = c.routine_id WHERE p.routine_id IN e),"
      "n AS (SELECT n.node_id, n.parent_id, n.calls,"
      "    n.excl_ns + COALESCE((SELECT SUM(k.incl_ns) FROM k WHERE k.node_id = n.node_id"
      "      AND k.name LIKE '%c\\_einsum%' ESCAPE '\\'), 0) AS own"
      "    FROM nodes n WHERE n.routine_id IN e AND NOT EXISTS (SELECT 1 FROM k"
      "      WHERE k.node_id = n.node_id AND (k.name LIKE '%(einsum\\_path)' ESCAPE '\\'"
      "        OR k.name LIKE '%(tensordot)')))"
      "SELECT COALESCE(SUM(own), 0), COALESCE(SUM(calls), 0),"
      "  (SELECT r.name FROM n JOIN nodes p ON p.node_id = n.parent_id"
      "   JOIN routines rp ON rp.routine_id = p.routine_id"
      "   LEFT JOIN nodes g ON g.node_id = p.parent_id"
      // numpy 1.2x's dispatcher frame, <__array_function__ internals>: its caller is the one.
      "   JOIN routines r ON r.routine_id = CASE WHEN rp.file = '<__array_function__ internals>'"
      "     AND g.node_id IS NOT NULL THEN g.routine_id ELSE p.routine_id END"
      "   GROUP BY r.routine_id ORDER BY SUM(n.own) DESC LIMIT 1) FROM n";
  auto any = file.prepare(
      "SELECT EXISTS (SELECT 1 FROM routines WHERE kind = 'python' AND file LIKE "
      "'%einsumfunc.py' AND name LIKE '%(einsum)')");
  if (!any.step() || any.int64(0) == 0) return out;
  if (auto st = file.prepare(kSql); st.step()) {
    out.ns = st.int64(0);
    out.calls = st.int64(1);
    if (!st.is_null(2)) out.caller = st.text(2);
  }
  return out;
}

}  // namespace sonde::analyzers
