// sonde merge: the files of one run's ranks (or processes) into one file.
#include "profile/merge.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <iostream>
#include <memory>

#include "base/progress.hpp"
#include "cli/command.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
};

int merge(const Options& a) {
  MergeOptions o;
  o.inputs = a.inputs;
  o.output = a.output;
  o.force = a.force;
  // A line redrawn in place, on a terminal only (base/progress.hpp), an input at a time.
  Progress files(stderr, "sonde merge");
  o.progress = [&files](std::size_t done, std::size_t total) {
    if (done == 1) files.start(static_cast<std::int64_t>(total), "files", true);
    files.advance();
  };
  auto start = std::chrono::steady_clock::now();
  MergeResult r = merge_profiles(o);
  files.finish();
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << fmt::format(
      "merged {} files ({} ranks, {} processes, {} call-path nodes{}) into "
      "{} in {:.2f} s\n",
      r.files, r.ranks, r.processes, r.nodes, r.run.empty() ? "" : ", run " + r.run,
      visible(a.output), seconds);
  for (const std::string& f : r.left_out) {
    fmt::print(stderr,
               "sonde merge: {} left out: not a rank's file (prof.rank<R>.db); given by name, "
               "it is merged too\n",
               visible(f));
  }
  for (const std::string& f : r.launchers)
    fmt::print(stderr,
               "sonde merge: {} left out: the launcher's own profile (sonde run around mpirun or "
               "torchrun), no rank's work\n",
               visible(f));
  for (const std::string& f : r.runless)
    fmt::print(stderr,
               "sonde merge: {} left out: it holds no run, no flush of its process yet (still "
               "running, or it ended before its first: killed, or out of memory)\n",
               visible(f));
  if (r.world_size > r.ranks) {
    fmt::print(stderr,
               "sonde merge: warning: the run had {} ranks and {} are in {}: its per-rank "
               "figures cover those only, and sonde scaling refuses it\n",
               r.world_size, r.ranks, visible(a.output));
  }
  return 0;
}
}  // namespace

Command add_merge(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "merge", "Merge the profiles of one run's ranks (prof.rank<R>.db) into one file");
  cmd->add_option("-o,--output", a->output, "The merged profile to write")->required();
  cmd->add_option("inputs", a->inputs, "Profiles, or directories of *.db profiles")->required();
  cmd->add_flag("--force", a->force,
                "Merge files of different runs or repeated ranks, and replace the output");
  return {cmd, [a] { return merge(*a); }};
}

}  // namespace sonde::cli
