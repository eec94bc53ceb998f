#include "advice/distribution_checks.hpp"

namespace sonde::analyzers {

DistributionChecks load_distribution_checks(const ProfileFile& file) {
  DistributionChecks d;
  // The checks are constraints.py's check and distribution.py's _validate_sample; outermost:
  // a check under another (log_prob's _validate_sample calling support.check, an independent
  // constraint calling its base's) is inside its caller's time.
  constexpr const char* kChecks =
      "WITH RECURSIVE checks(routine_id) AS ("
      "  SELECT routine_id FROM routines WHERE kind = 'python' AND ("
      "    (instr(file, 'torch/distributions/constraints.py') > 0 AND name LIKE '%(check)') OR"
      "    (instr(file, 'torch/distributions/distribution.py') > 0"
      "     AND name LIKE '%(\\_validate\\_sample)' ESCAPE '\\'))),"
      "outer AS ("
      "  SELECT n.node_id, n.incl_ns, n.calls, p.routine_id AS caller FROM nodes n"
      "  JOIN nodes p ON p.node_id = n.parent_id"
      "  WHERE n.routine_id IN (SELECT routine_id FROM checks)"
      "    AND p.routine_id NOT IN (SELECT routine_id FROM checks)"
      "    AND n.node_id NOT IN (SELECT node_id FROM waited_nodes))"
      "SELECT COALESCE(SUM(incl_ns), 0), COALESCE(SUM(calls), 0),"
      "  (SELECT r.name FROM outer o JOIN routines r ON r.routine_id = o.caller"
      "   GROUP BY o.caller ORDER BY SUM(o.incl_ns) DESC LIMIT 1) FROM outer";
  auto st = file.prepare(kChecks);
  if (st.step()) {
    d.ns = st.int64(0);
    d.calls = st.int64(1);
    if (!st.is_null(2)) d.caller = st.text(2);
  }
  return d;
}

}  // namespace sonde::analyzers
