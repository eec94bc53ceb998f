#include "advice/loader_workers.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

namespace sonde::analyzers {

LoaderWorkers load_loader_workers(const ProfileFile& file) {
  LoaderWorkers w;
  // Per parent, its workers' starts (+1) and ends (-1): a loader's workers are its process's
  // children, alive together; a loader made again each epoch starts a new set after the last.
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, int>>> lives;
  auto st = file.prepare(
      "SELECT ppid, started_ns, ended_ns, batches, CAST(ROUND(fetch_s * 1e9) AS INTEGER) "
      "FROM dataloader_workers");
  while (st.step()) {
    ++w.processes;
    w.batches += st.int64(3);
    w.fetch_ns += st.int64(4);
    auto& events = lives[st.is_null(0) ? 0 : st.int64(0)];
    events.emplace_back(st.int64(1), +1);
    if (!st.is_null(2)) {
      events.emplace_back(st.int64(2), -1);
      w.life_ns += std::max<std::int64_t>(0, st.int64(2) - st.int64(1));
    }
  }
  auto it = file.prepare(
      "SELECT 1 FROM nodes f JOIN routines fr USING (routine_id) JOIN nodes g "
      "ON g.parent_id = f.node_id JOIN routines gr ON gr.routine_id = g.routine_id "
      "WHERE fr.kind = 'python' AND fr.name LIKE '%(fetch)' "
      "AND instr(fr.file, 'torch/utils/data/_utils/fetch.py') > 0 "
      "AND gr.kind = 'python' AND gr.library = 'generator' LIMIT 1");
  w.iterable = it.step();
  for (auto& [parent, events] : lives) {
    std::sort(events.begin(), events.end());  // an end before a start at the same instant
    std::int64_t alive = 0, most = 0, started = 0;
    for (const auto& [at, step] : events) {
      most = std::max(most, alive += step);
      if (step > 0) ++started;
    }
    w.at_once = std::max(w.at_once, most);
    if (most > 0) w.sets = std::max(w.sets, (started + most - 1) / most);
  }
  return w;
}

}  // namespace sonde::analyzers
