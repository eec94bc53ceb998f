// Profile, edit, profile again: an existing profile at the output is kept as <output>.old, as
// perf keeps perf.data.old, so the new run is never blocked and the previous one never lost.
#pragma once

#include <string>

namespace sonde::analyzers {

enum class PreviousProfile {
  none,         // `output` is no sonde profile, left in place: it may be anything of the user's
  kept,         // moved to `output`.old
  not_started,  // a profile no process has written to yet, left in place (see below)
};

// Moves the sonde profile at `output` (a regular SQLite file whose meta table names a
// schema_version; with its -journal, -wal and -shm) to `output`.old, replacing an earlier .old
// the same way. Throws Error when a process of that profile is still running on this host
// (renamed under it, its next flush would open the new file by its name and write there), or
// when the .old cannot be replaced (a directory, a FIFO, a rename that fails).
//
// A profile without a process row is a run's claim of the name in the second before its first
// flush (or a run that ended before it): moved, that run's first flush would go into the file
// of the run moving it. It stays, and the new run's runtime writes beside it
// (sonde/output_name.hpp).
PreviousProfile keep_previous_profile(const std::string& output);

}  // namespace sonde::analyzers
