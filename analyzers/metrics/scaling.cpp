#include "metrics/scaling.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <tuple>

#include "base/output_file.hpp"
#include "metrics/breakdown.hpp"
#include "metrics/loaded_profile.hpp"
#include "profile/launcher_file.hpp"
#include "profile/profile_file.hpp"
#include "profile/rank_file.hpp"

namespace sonde::analyzers {
namespace {

using RoutineKey = std::tuple<std::string, std::string, std::string, std::string, std::int64_t>;

struct RunFigures {
  ScalingRun run;
  std::map<RoutineKey, double> times;
  std::vector<std::pair<RoutineKey, double>> order;  // by time, largest first
  // By the key with the file's base name alone: the times, one per routine.
  std::map<RoutineKey, std::vector<double>> by_base_name;
};

// A routine's file as the run named it, `..` and `.` resolved: a script given by a relative
// path is named from the folder each run started in (/jobs/n1/../../train.py), and the runs of
// one job at 1, 2 and 4 ranks, each in its own folder, had no function of the program in
// common (a red team's `sonde scaling`).
std::string normal_file(const std::string& file) {
  return file.empty() ? file : std::filesystem::path(file).lexically_normal().string();
}

RoutineKey base_name_key(const RoutineKey& key) {
  RoutineKey loose = key;
  std::get<3>(loose) = std::filesystem::path(std::get<3>(key)).filename().string();
  return loose;
}

// The routine's time in `run`: the same routine's, else the one routine of the same kind,
// name, library, line and file base name where each run has one (the program run from two
// copies of it), as sonde diff pairs them.
std::optional<double> time_in(const RunFigures& run, const RunFigures& ref, const RoutineKey& key) {
  if (auto at = run.times.find(key); at != run.times.end()) return at->second;
  RoutineKey loose = base_name_key(key);
  auto theirs = run.by_base_name.find(loose);
  auto ours = ref.by_base_name.find(loose);
  if (theirs == run.by_base_name.end() || theirs->second.size() != 1 ||
      ours == ref.by_base_name.end() || ours->second.size() != 1)
    return std::nullopt;
  return theirs->second.front();
}

RunFigures read_run(const std::string& path) {
  ProfileFile file = ProfileFile::open(path);
  RunFigures f;
  f.run.path = path;
  if (auto st = file.prepare("SELECT ranks, threads, time_s FROM run_scale"); st.step()) {
    f.run.ranks = st.int64(0);
    f.run.threads = std::max<std::int64_t>(1, st.int64(1));
    f.run.time_s = st.is_null(2) ? 0 : st.real(2);
  }
  if (f.run.ranks == 0) throw Error(fmt::format("{} holds no process", path));
  if (auto note = launcher_file_note(file))
    throw Error(fmt::format("{} holds no rank's work: it is {}", path, *note));

  // One rank's file of a 4-rank job read as a 1-rank run, at 4 x the efficiency it had.
  if (std::int64_t world = run_world_size(file); world > f.run.ranks) {
    throw Error(fmt::format(
        "{} holds {} of its run's {} ranks: scaling needs them all (sonde merge -o run.db "
        "prof.rank*.db)",
        path, f.run.ranks, world));
  }
  if (f.run.ranks <= kLoopRanks) {
    LoadedProfile profile(file);
    const Breakdown& b = profile.breakdown();
    if (b.found && !b.inference && !b.rank_loop_ns.empty()) {
      std::int64_t slowest = 0;
      for (const auto& [rank, ns] : b.rank_loop_ns) slowest = std::max(slowest, ns);
      f.run.loop_s = static_cast<double>(slowest) / 1e9;
      std::int64_t most = b.iterations;
      if (!b.rank_iterations.empty()) {
        most = 0;
        for (const auto& [rank, n] : b.rank_iterations) most = std::max(most, n);
      }
      f.run.iterations = most;
    }
  }
  auto st = file.prepare(
      "SELECT i.kind, i.routine, r.library, r.file, r.line, i.max_s FROM rank_imbalance i "
      "JOIN routines r USING (routine_id) WHERE i.kind <> 'root' ORDER BY i.max_s DESC, "
      "i.routine");
  // Two routines of one key (a script run as /dir/./w.py that imports itself as w: one file
  // named two ways) are one row, their times added; each printed the last one's time, twice (a
  // review's).
  while (st.step()) {
    RoutineKey key{st.text(0), st.text(1), st.text(2), normal_file(st.text(3)), st.int64(4)};
    f.times[key] += st.real(5);
  }
  for (const auto& [key, time] : f.times) {
    f.order.emplace_back(key, time);
    f.by_base_name[base_name_key(key)].push_back(time);
  }
  std::stable_sort(f.order.begin(), f.order.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : std::get<1>(a.first) < std::get<1>(b.first);
  });
  return f;
}

}  // namespace

double scaling_efficiency(double ref_time, std::int64_t ref_workers, double time,
                          std::int64_t workers, bool weak) {
  if (time <= 0 || workers <= 0) return 0;
  if (weak) return ref_time / time;
  return ref_time * static_cast<double>(ref_workers) / (time * static_cast<double>(workers));
}

Scaling compute_scaling(const std::vector<std::string>& paths, bool weak, std::size_t top) {
  if (paths.size() < 2) throw Error("scaling compares at least two runs", 2);
  refuse_repeated_inputs(paths);
  std::vector<RunFigures> runs;
  for (const std::string& p : paths) runs.push_back(read_run(p));
  std::stable_sort(runs.begin(), runs.end(), [](const RunFigures& a, const RunFigures& b) {
    return a.run.workers() < b.run.workers();
  });
  Scaling s;
  s.weak = weak;
  for (const RunFigures& r : runs) s.runs.push_back(r.run);
  const RunFigures& ref = runs.front();
  for (const RunFigures& r : runs) {
    if (&r != &ref && r.run.workers() == ref.run.workers()) {
      s.warnings.push_back(fmt::format(
          "{} and {} ran on the same {} workers ({} x {}): their ratio is run-to-run noise or a "
          "change of the program, not scaling",
          ref.run.path, r.run.path, r.run.workers(), r.run.ranks, r.run.threads));
      break;
    }
  }
  for (const auto& [key, time] : ref.order) {
    if (top && s.routines.size() == top) break;
    ScalingRoutine row{std::get<1>(key), std::get<0>(key), {}};
    for (const RunFigures& r : runs) row.time_s.push_back(time_in(r, ref, key));
    s.routines.push_back(std::move(row));
  }
  return s;
}

}  // namespace sonde::analyzers
