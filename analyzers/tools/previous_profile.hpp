// Profile, edit, profile again: an existing profile at the output is kept as <output>.old, as
// perf keeps perf.data.old, so the new run is never blocked and the previous one never lost.
#pragma once

#include <optional>
#include <string>

namespace sonde::analyzers {

// Moves the sonde profile at `output` (a regular SQLite file whose meta table names a
// schema_version; with its -journal, -wal and -shm)
// to `output`.old, replacing an earlier .old the same way, and returns the .old's path. Returns
// nothing, leaving everything in place, when `output` is not such a file (the caller
// refuses it as before: it may be anything of the user's). Throws Error when a process of that
// profile is still running on this host (renamed under it, its next flush would write the .old
// and a journal beside the new name), or when the .old cannot be replaced (a directory, a FIFO,
// a rename that fails).
std::optional<std::string> keep_previous_profile(const std::string& output);

}  // namespace sonde::analyzers
