// The outermost calls of a set of routines (one inside another, at any depth, counts once), as
// the rules that measure a library's own machinery read them: torch.distributions' checks,
// the PyTorch profiler's frames. Waits for work left out, as every sum over threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct OutermostFrames {
  std::int64_t ns = 0;     // their inclusive time, every thread
  std::int64_t calls = 0;  // their calls
  std::string caller;      // the routine that called them the longest
};

// `routines`: an SQL condition on the routines table's columns (kind, file, name).
OutermostFrames outermost_frames(const ProfileFile& file, std::string_view routines);

}  // namespace sonde::analyzers
