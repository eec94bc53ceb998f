// `sonde export`: the profile in formats other tools read.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "profile/call_tree.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// Folded stacks (flamegraph.pl, speedscope, inferno): the `callpaths` view's paths (frames
// root-first joined by ';', no thread root), value = exclusive microseconds merged over threads,
// sorted by path, zero values left out.
std::vector<std::pair<std::string, std::int64_t>> folded_stacks(const ProfileFile& file);
void write_folded(const ProfileFile& file, std::ostream& out);

// Chrome trace-event JSON (Perfetto, chrome://tracing). Real events when the file has trace
// events; otherwise a flame-chart layout of the aggregated tree, labelled as such in otherData.
void write_chrome_trace(const ProfileFile& file, std::ostream& out);

}  // namespace sonde::analyzers
