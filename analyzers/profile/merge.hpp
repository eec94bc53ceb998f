// sonde merge: many profiles of one run (a file per MPI rank) into one file, streaming: each
// input is attached to the output and copied with INSERT ... SELECT, its ids shifted past the
// ones already there, so memory is bounded by SQLite's page cache, not by the inputs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sonde::analyzers {

struct MergeOptions {
  std::vector<std::string> inputs;  // files, or directories whose *.db files are read
  std::string output;
  bool force = false;  // merge files of different runs or repeated ranks; replace the output
  // Called after each input with (done, total); the CLI draws its progress bar with it.
  std::function<void(std::size_t, std::size_t)> progress;
};

struct MergeResult {
  std::size_t files = 0;
  std::int64_t processes = 0, ranks = 0, nodes = 0;
  std::int64_t world_size = 0;        // the ranks the run had (0: not a ranked run)
  std::string run;                    // the run id (runs.uuid) the inputs share
  std::vector<std::string> left_out;  // a directory's files that are not ranks' (see below)
  // Inputs that are a launcher's own profile (sonde run -o prof.db -- mpirun ...: no rank's
  // work, profile/launcher_file.hpp), left out: given with its ranks' files (prof*.db), it was
  // taken for a rank 0 and refused as one given twice.
  std::vector<std::string> launchers;
  // Inputs that hold no run: the blank profile a process claims at its start, never flushed (a
  // rank killed before its first flush), left out: one such rank file refused the whole merge
  // ("holds no run"), and the other ranks' data could not be read together (a red team's).
  std::vector<std::string> runless;
};

// The inputs in merge order: files as given, a directory's *.db files by rank (prof.rank<R>.db
// in rank order), then by name. Throws Error for a missing input or an empty directory.
// Where a directory holds rank files, its other *.db files are left out (into `left_out`).
std::vector<std::string> expand_merge_inputs(const std::vector<std::string>& inputs,
                                             const std::string& output,
                                             std::vector<std::string>* left_out = nullptr);

// Throws Error (nothing written to `output`) when an input is not a readable profile of this
// version or is given twice; when it belongs to another run (another runs.uuid: the ranks of one
// job share theirs) or repeats a rank, or when `output` exists, unless `force`.
MergeResult merge_profiles(const MergeOptions& options);

}  // namespace sonde::analyzers
