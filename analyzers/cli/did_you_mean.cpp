#include "cli/did_you_mean.hpp"

#include <algorithm>

namespace sonde::cli {
namespace {

// Optimal string alignment distance: insertions, deletions, substitutions, adjacent swaps.
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

}  // namespace

std::optional<std::string> nearest_name(std::string_view word,
                                        const std::vector<std::string>& names) {
  std::optional<std::string> best;
  std::size_t best_distance = 3, ties = 0;
  for (const std::string& name : names) {
    std::size_t d = distance(word, name);
    if (d < best_distance) {
      best = name;
      best_distance = d;
      ties = 0;
    } else if (d == best_distance) {
      ++ties;
    }
  }
  if (ties > 0) return std::nullopt;  // two as near: say neither
  return best;
}

}  // namespace sonde::cli
