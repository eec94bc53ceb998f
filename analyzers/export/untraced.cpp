#include "export/untraced.hpp"

namespace sonde::analyzers {

Untraced load_untraced(const ProfileFile& file) {
  Untraced u;
  if (!file.has_rows("trace_events")) return u;
  auto st = file.prepare(
      "SELECT t.thread_id FROM threads t WHERE t.process_id NOT IN ("
      "  SELECT DISTINCT t2.process_id FROM trace_events e JOIN threads t2 USING (thread_id))");
  while (st.step()) u.threads.insert(st.int64(0));
  if (u.threads.empty()) return u;
  auto ends = file.prepare(
      "SELECT p.pid, t.tid, MAX(e.end_ns) - (SELECT MIN(start_ns) FROM trace_events) "
      "FROM trace_events e JOIN threads t USING (thread_id) JOIN processes p USING (process_id) "
      "GROUP BY p.pid, t.tid");
  while (ends.step()) u.events_end[{ends.int64(0), ends.int64(1)}] = ends.int64(2);
  return u;
}

}  // namespace sonde::analyzers
