// One rank of a merged (or ranked) profile, as the rank's own file would read: its processes,
// threads, call paths and everything recorded under them, copied into memory with the schema's
// views, so every command computes a rank's figures with the same views it uses on any file
// (its percentages are of that rank's time). And the line that says when a command's figures
// are summed over several ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// The file itself without `rank`; with it, that rank alone (Error when the file holds no such
// rank, naming the ranks it holds).
ProfileFile open_profile(const std::string& path, std::optional<std::int64_t> rank);

// The process with that pid alone (its threads and what they recorded; an exec'd image, which
// keeps the pid, with it), as open_rank takes a rank's processes. Error (exit 2) when no process
// has the pid, or processes of several ranks (hosts) have it.
ProfileFile open_pid(const ProfileFile& file, std::int64_t pid);

// The run's number of ranks, as its ranks gave it (MPI's or torch.distributed's world size); 0
// where no process has a rank. One rank's file of a larger run holds fewer.
std::int64_t run_world_size(const ProfileFile& file);

// For a file of several ranks read whole: "all N ranks summed: ..."; nothing for one rank.
std::optional<std::string> all_ranks_note(const ProfileFile& file);

}  // namespace sonde::analyzers
