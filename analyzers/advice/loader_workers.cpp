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

// What torch.utils.data's fetch() called, summed over its calls in every process: the dataset's
// generator (an IterableDataset), the program's get_worker_info() and collate_fn. Asked only
// of a run that fetched: a scan of every node (the tables have no index by routine).
void read_fetches(const ProfileFile& file, LoaderWorkers& w) {
  std::string ids;
  for (auto st = file.prepare(
           "SELECT routine_id FROM routines WHERE kind = 'python' AND name LIKE '%(fetch)' "
           "AND instr(file, 'torch/utils/data/_utils/fetch.py') > 0");
       st.step();)
    ids += (ids.empty() ? "" : ",") + std::to_string(st.int64(0));
  if (ids.empty()) return;
  std::int64_t fetch_ns = 0, collate_ns = 0;
  for (auto st = file.prepare("SELECT SUM(incl_ns) FROM nodes WHERE routine_id IN (" + ids +
                              ") AND recursive = 0");
       st.step();)
    fetch_ns = st.int64(0);
  for (auto st = file.prepare(
           "SELECT r.name, COALESCE(r.file, ''), r.library, SUM(c.incl_ns) FROM nodes f JOIN "
           "nodes c ON c.parent_id = f.node_id JOIN routines r ON r.routine_id = c.routine_id "
           "WHERE f.routine_id IN (" +
           ids + ") AND r.kind = 'python' GROUP BY r.routine_id ORDER BY 4 DESC");
       st.step();) {
    std::string name = st.text(0), where = st.text(1), library = st.text(2);
    // A dataset's generator (__iter__'s), or the iterator __iter__ returned (self, with a
    // __next__): an IterableDataset's samples, not a collate_fn.
    if (library == "generator" || name.ends_with("(__next__)")) {
      w.iterable = true;
    } else if (where.find("torch/utils/data/") == std::string::npos && user_file(where) &&
               !name.ends_with("(__getitem__)") && !name.ends_with("(__getitems__)")) {
      if (w.collate_fn.empty()) w.collate_fn = name;
      collate_ns += st.int64(3);
    }
  }
  if (fetch_ns > 0) w.collate_share = static_cast<double>(collate_ns) / fetch_ns;
  // torch's own default_collate asks too (collate.py, for shared memory in a worker): only a
  // caller outside torch.utils.data says the program shards.
  if (w.iterable)
    w.sharded = file.prepare(
                        "SELECT 1 FROM routines gr JOIN nodes g USING (routine_id) JOIN nodes f "
                        "ON f.node_id = g.parent_id JOIN routines fr ON fr.routine_id = "
                        "f.routine_id WHERE gr.kind = 'python' AND gr.name LIKE "
                        "'%(get_worker_info)' AND instr(gr.file, 'torch/utils/data/') > 0 "
                        "AND fr.kind = 'python' AND instr(fr.file, 'torch/utils/data/') = 0 "
                        "LIMIT 1")
                    .step();
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
  read_fetches(file, w);
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
