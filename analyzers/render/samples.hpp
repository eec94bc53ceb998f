// The sampler's paths (SONDE_SAMPLE_HZ), as `sonde tree` and `sonde report` show them: apart
// from the exact figures, marked as sampled, with their share's standard error.
#pragma once

#include <string>

#include "base/table_format.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// The `sampled_paths` view, merged over threads by path and frames, most samples first; no rows
// when the run was not sampled (or the file predates the sampler). top = 0: every row.
Table sampled_table(const ProfileFile& file, std::size_t top);
// "" when there are no samples.
std::string render_samples_text(const ProfileFile& file, std::size_t top = 20);
Json render_samples_json(const ProfileFile& file, std::size_t top = 0);

}  // namespace sonde::analyzers
