#include "advice/debug_tools.hpp"

#include "advice/outermost_frames.hpp"

namespace sonde::analyzers {

DebugTools load_debug_tools(const ProfileFile& file) {
  DebugTools d;
  // A traceback frame whose caller is an operator: only anomaly mode's stack record makes
  // one (a program's own traceback calls come from Python frames). Its NaN checks: isnan, any
  // and the item() reading it, called by autograd's evaluate_function itself, only where the
  // stacks say the mode is on.
  // (Each query scans the nodes once for the few routines it names, the rest looked up by key:
  // joined from the routines, SQLite built an index of every node for each, 0.7-1.2 s a query
  // on a million nodes.)
  constexpr const char* kAnomaly =
      "WITH tb AS (SELECT routine_id FROM routines"
      "            WHERE kind = 'python' AND file LIKE '%/traceback.py'),"
      "checks_of AS (SELECT routine_id FROM routines WHERE kind = 'torch' AND name IN"
      "  ('aten::isnan', 'aten::any', 'aten::item', 'aten::_local_scalar_dense')),"
      "stacks AS ("
      "  SELECT n.incl_ns, n.calls FROM nodes n CROSS JOIN nodes p ON p.node_id = n.parent_id"
      "  JOIN routines pr ON pr.routine_id = p.routine_id"
      "  WHERE n.routine_id IN tb AND pr.kind = 'torch'"
      "    AND n.node_id NOT IN (SELECT node_id FROM waited_nodes)),"
      "checks AS ("
      "  SELECT n.incl_ns, n.calls FROM nodes n CROSS JOIN nodes p ON p.node_id = n.parent_id"
      "  JOIN routines pr ON pr.routine_id = p.routine_id"
      "  WHERE n.routine_id IN checks_of AND pr.kind = 'torch'"
      "    AND pr.name LIKE 'autograd::engine::evaluate\\_function:%' ESCAPE '\\')"
      "SELECT (SELECT COALESCE(SUM(incl_ns), 0) FROM stacks), (SELECT COALESCE(SUM(calls), 0) "
      "FROM stacks), (SELECT COALESCE(SUM(incl_ns), 0) FROM checks), (SELECT "
      "COALESCE(SUM(calls), 0) FROM checks)";
  if (auto st = file.prepare(kAnomaly); st.step()) {
    d.stack_ns = st.int64(0);
    d.stacks = st.int64(1);
    if (d.stacks > 0) {
      d.nan_check_ns = st.int64(2);
      d.nan_checks = st.int64(3);
    }
  }
  // The profiler's frames: torch.profiler's package, the autograd profiler's event tables
  // (profiler_util.py), and the autograd profiler's own profile methods; record_function (the
  // optimizers' step wrapper opens one every step) is none of them. Outermost only: its event
  // tables call back into profile's methods through frames of neither.
  OutermostFrames prof = outermost_frames(
      file,
      "kind = 'python' AND ("
      "  instr(file, '/torch/profiler/') > 0 OR file LIKE '%/torch/autograd/profiler\\_util.py'"
      "  ESCAPE '\\' OR (file LIKE '%/torch/autograd/profiler.py' AND ("
      "    name LIKE '%(\\_start\\_trace)' ESCAPE '\\' OR name LIKE '%(\\_prepare\\_trace)' "
      "ESCAPE '\\' OR name LIKE '%(\\_parse\\_kineto\\_results)' ESCAPE '\\'"
      "    OR name LIKE '%(\\_parse\\_legacy\\_records)' ESCAPE '\\' OR name LIKE "
      "'%(key\\_averages)' ESCAPE '\\'"
      "    OR name LIKE '%(export\\_chrome\\_trace)' ESCAPE '\\' OR name LIKE '%(table)')))");
  d.profiler_ns = prof.ns;
  d.profiler_calls = prof.calls;
  d.profiler_caller = prof.caller;
  // Module hooks: what torch.nn's _call_impl calls besides the module's forward (under tracing,
  // _slow_forward) is its hooks and their set-up; the backward hooks run in their own autograd
  // nodes. (A module's forward calls other modules' _call_impl: each hook counts once, at its
  // own module.) Not the hooks torch installs to compute the model: spectral_norm's and
  // weight_norm's weights, pruning's masks (torch/nn/utils), quantization's observers and
  // fake-quantizers (torch/ao), FSDP's gathers (torch/distributed). A red team's spectral-norm
  // discriminator was told to remove its power iteration or run it every Nth step.
  constexpr const char* kHooks =
      "WITH impl AS (SELECT routine_id FROM routines"
      "  WHERE kind = 'python' AND file LIKE '%/torch/nn/modules/module.py'"
      "    AND (name LIKE '%(\\_call\\_impl)' ESCAPE '\\'"
      "         OR name LIKE '%(\\_wrapped\\_call\\_impl)' ESCAPE '\\')),"
      "hooks AS ("
      "  SELECT n.routine_id, n.incl_ns, n.calls, r.file FROM nodes p"
      "  CROSS JOIN nodes n ON n.parent_id = p.node_id JOIN routines r ON r.routine_id = "
      "n.routine_id"
      "  WHERE p.routine_id IN impl AND r.kind = 'python' AND r.name NOT LIKE '%(forward)'"
      "    AND r.name NOT LIKE '%(\\_slow\\_forward)' ESCAPE '\\'"
      "    AND r.name NOT LIKE '%(\\_call\\_impl)' ESCAPE '\\'"
      "    AND r.file NOT LIKE '%/torch/nn/utils/%' AND r.file NOT LIKE '%/torch/ao/%'"
      "    AND r.file NOT LIKE '%/torch/distributed/%'"
      "    AND n.node_id NOT IN (SELECT node_id FROM waited_nodes)),"
      "backward AS ("
      "  SELECT incl_ns FROM nodes WHERE routine_id IN (SELECT routine_id FROM routines"
      "    WHERE kind = 'torch'"
      "      AND name = 'autograd::engine::evaluate_function: BackwardHookFunctionBackward'))"
      "SELECT (SELECT COALESCE(SUM(incl_ns), 0) FROM hooks), (SELECT COALESCE(SUM(calls), 0) "
      "FROM hooks), (SELECT COALESCE(SUM(incl_ns), 0) FROM backward),"
      "  (SELECT r.name FROM hooks h JOIN routines r USING (routine_id)"
      "   WHERE instr(h.file, '/torch/') = 0 GROUP BY h.routine_id ORDER BY SUM(h.incl_ns) DESC"
      "   LIMIT 1)";
  if (auto st = file.prepare(kHooks); st.step()) {
    d.hook_ns = st.int64(0);
    d.hook_calls = st.int64(1);
    d.backward_hook_ns = st.int64(2);
    if (!st.is_null(3)) d.hook = st.text(3);
  }
  return d;
}

}  // namespace sonde::analyzers
