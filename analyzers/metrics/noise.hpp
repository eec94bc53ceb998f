// When two sets of runs of one figure differ beyond the machine's noise: sonde's one rule, which
// `sonde tune` (is a stage faster?) and `sonde diff` (is this figure within noise?) both apply.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace sonde::analyzers {

// A figure over the runs of one side: median and min-max.
struct Spread {
  double median = 0, min = 0, max = 0;
  std::size_t runs = 0;
};
Spread spread_of(std::vector<double> values);

// The rule: the sides differ beyond the noise only when their min-max ranges are apart (every
// run of one beat every run of the other), the medians differ by more than kNoiseMinEffect and
// by more than a figure's own floor (min_abs: a launch's jitter for whole-program seconds), and
// that order is no likely chance: without any effect, the runs fall in one of the C(n + m, n)
// orders alike, so "every run of one side above every run of the other" happens by chance once
// in C(n + m, n) for a given side; no verdict where that is over kNoiseMaxChance (three runs a
// side: 1 in 20; two: 1 in 6).
inline constexpr double kNoiseMinEffect = 0.03;
inline constexpr double kNoiseMaxChance = 0.05;

enum class Noise {
  kUnknown,     // a side has no value
  kWithin,      // the ranges overlap (or touch)
  kTooFewRuns,  // apart, but so few runs fall in that order by chance too often
  kSmall,       // apart, by kNoiseMinEffect or less
  kTooSmall,    // apart, by min_abs or less: the figure's floor
  kBeyond,      // apart beyond the noise: the one rule's finding
};

bool too_few_runs(std::size_t runs_a, std::size_t runs_b);
Noise judge_noise(const std::vector<double>& a, const std::vector<double>& b, double min_abs = 0);
// "within noise", "beyond noise", "too few runs", "under 3 %", "under the floor", "unknown".
std::string noise_text(Noise noise);

}  // namespace sonde::analyzers
