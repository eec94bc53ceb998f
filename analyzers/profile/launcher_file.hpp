// The profile `sonde run -o prof.db -- mpirun ...` (or torchrun) writes for the launcher itself:
// its processes hold no rank's work, the ranks wrote prof.rank<R>.db beside it, and sonde run
// (or libsonde, at the exit of an in-process python -m sonde) noted that in it once they had
// (store/rank_files.hpp). Read as a run of one rank, it gave `sonde scaling` and `sonde ranks`
// figures of nothing, and `sonde merge` a rank 0 twice.
#pragma once

#include <optional>
#include <string>

#include "profile/profile_file.hpp"
#include "store/rank_files.hpp"

namespace sonde::analyzers {

// The note sonde run wrote (which files the ranks wrote, and the merge that reads them) where
// `file` is such a launcher's profile: none of its processes has a rank. Else nothing.
std::optional<std::string> launcher_file_note(const ProfileFile& file);

}  // namespace sonde::analyzers
