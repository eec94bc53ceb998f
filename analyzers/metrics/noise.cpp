#include "metrics/noise.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace sonde::analyzers {

Spread spread_of(std::vector<double> v) {
  Spread s;
  s.runs = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  s.min = v.front();
  s.max = v.back();
  return s;
}

bool too_few_runs(std::size_t runs_a, std::size_t runs_b) {
  double orders = 1;  // C(n + m, m), built up term by term
  for (std::size_t i = 1; i <= runs_b; ++i)
    orders = orders * static_cast<double>(runs_a + i) / static_cast<double>(i);
  return 1 / orders > kNoiseMaxChance;
}

Noise judge_noise(const std::vector<double>& a, const std::vector<double>& b, double min_abs) {
  if (a.empty() || b.empty()) return Noise::kUnknown;
  Spread x = spread_of(a), y = spread_of(b);
  if (x.max >= y.min && y.max >= x.min) return Noise::kWithin;
  if (too_few_runs(a.size(), b.size())) return Noise::kTooFewRuns;
  double lo = std::min(x.median, y.median), hi = std::max(x.median, y.median);
  // Apart with both medians at 0 cannot be (the ranges would touch); lo 0 is an infinite effect.
  if (hi - lo <= min_abs) return Noise::kTooSmall;
  return lo > 0 && hi / lo <= 1 + kNoiseMinEffect ? Noise::kSmall : Noise::kBeyond;
}

std::string noise_text(Noise noise) {
  switch (noise) {
    case Noise::kWithin:
      return "within noise";
    case Noise::kBeyond:
      return "beyond noise";
    case Noise::kTooFewRuns:
      return "too few runs";
    case Noise::kSmall:
      return fmt::format("under {:g} %", kNoiseMinEffect * 100);
    case Noise::kTooSmall:
      return "under the floor";
    case Noise::kUnknown:
      break;
  }
  return "unknown";
}

}  // namespace sonde::analyzers
