#include "advice/loader_workers.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "metrics/breakdown_roles.hpp"

namespace sonde::analyzers {

namespace {

// Per fork-child worker process, the frame of the program that iterated its loader: above the
// DataLoader's __iter__ in the stack the child inherited, past the frames of packages and the
// standard library (tqdm's __iter__, enumerate's none); "<thread>" at the thread's top, as the
// breakdown names the loop's readers. A worker of another start method has no inherited stack,
// and no entry.
std::map<std::int64_t, std::string> loader_callers(const ProfileFile& file) {
  struct Frame {
    std::int64_t parent = 0;
    std::string name, file, kind;
  };
  std::map<std::int64_t, std::map<std::int64_t, Frame>> frames;  // process -> node -> frame
  for (auto st = file.prepare(
           "SELECT t.process_id, n.node_id, COALESCE(n.parent_id, 0), r.name, "
           "COALESCE(r.file, ''), r.kind FROM inherited_frames i JOIN nodes n USING (node_id) "
           "JOIN routines r USING (routine_id) JOIN threads t ON t.thread_id = n.thread_id "
           "WHERE t.process_id IN (SELECT process_id FROM dataloader_workers)");
       st.step();)
    frames[st.int64(0)][st.int64(1)] = {st.int64(2), st.text(3), st.text(4), st.text(5)};
  std::map<std::int64_t, std::string> out;
  for (const auto& [process, nodes] : frames)
    for (const auto& [id, f] : nodes) {
      if (f.kind != "python" || !f.name.ends_with("(__iter__)") ||
          f.file.find("torch/utils/data/dataloader.py") == std::string::npos)
        continue;
      std::string caller = "<thread>";
      for (auto up = nodes.find(f.parent); up != nodes.end(); up = nodes.find(up->second.parent)) {
        const Frame& g = up->second;
        if (g.kind == "python" && user_file(g.file)) {
          caller = g.name;
          break;
        }
      }
      out[process] = caller;
      break;
    }
  return out;
}

}  // namespace

LoaderWorkers load_loader_workers(const ProfileFile& file, const std::set<std::string>* reading) {
  LoaderWorkers w;
  struct Worker {
    std::int64_t parent, started, ended, batches, fetch_ns, process;
    bool ended_known;
  };
  std::vector<Worker> workers;
  for (auto st = file.prepare(
           "SELECT ppid, started_ns, ended_ns, batches, CAST(ROUND(fetch_s * 1e9) AS INTEGER), "
           "process_id FROM dataloader_workers");
       st.step();)
    workers.push_back({st.is_null(0) ? 0 : st.int64(0), st.int64(1),
                       st.is_null(2) ? 0 : st.int64(2), st.int64(3), st.int64(4), st.int64(5),
                       !st.is_null(2)});
  // Asked only of a run with workers: the view walks every node (a 1M-node profile's
  // candidates took 0.1 s more for none).
  std::map<std::int64_t, std::string> callers;
  if (reading != nullptr && !workers.empty()) callers = loader_callers(file);
  // Per parent, its workers' starts (+1) and ends (-1): a loader's workers are its process's
  // children, alive together; a loader made again each epoch starts a new set after the last.
  std::map<std::int64_t, std::vector<std::pair<std::int64_t, int>>> lives;
  for (const Worker& k : workers) {
    if (auto c = callers.find(k.process); c != callers.end() && !reading->count(c->second))
      continue;
    ++w.processes;
    w.batches += k.batches;
    w.fetch_ns += k.fetch_ns;
    auto& events = lives[k.parent];
    events.emplace_back(k.started, +1);
    if (k.ended_known) {
      events.emplace_back(k.ended, -1);
      w.life_ns += std::max<std::int64_t>(0, k.ended - k.started);
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
