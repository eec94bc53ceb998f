// `sonde query` and `sonde export --format csv`: arbitrary read-only SQL into a Table.
#pragma once

#include <string>

#include "base/table_format.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// Runs every statement of `sql`; returns the rows of the last one that returns columns.
// A statement that would write is refused before it runs (Error, exit 1).
Table run_query(const ProfileFile& file, const std::string& sql);

}  // namespace sonde::analyzers
