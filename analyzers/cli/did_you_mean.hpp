// `sonde reprot`: one line naming the command meant, not the whole help.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sonde::cli {

// The name in `names` nearest to `word` by edit distance (a swap of two neighbours counts
// one), if it is within 2 edits and nearer than every other; nothing otherwise.
std::optional<std::string> nearest_name(std::string_view word,
                                        const std::vector<std::string>& names);

}  // namespace sonde::cli
