// Small arithmetic and text helpers shared by the rule files of `sonde candidates`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sonde::analyzers::rules_detail {

inline double seconds(std::int64_t ns) { return static_cast<double>(ns) / 1e9; }

// part as % of total; 0 when total is not positive.
inline double share(std::int64_t part, std::int64_t total) {
  return total > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(total) : 0.0;
}

// The rule's advice text with its "{}" replaced by what the candidate concerns.
inline std::string fill(std::string_view text, std::string_view what) {
  std::string out(text);
  if (auto pos = out.find("{}"); pos != std::string::npos) out.replace(pos, 2, what);
  return out;
}

}  // namespace sonde::analyzers::rules_detail
