// Metrics derived from the PAPI counters a run recorded (SONDE_COUNTERS): IPC, cache-miss rates,
// CPU busy share, page faults per second. Each metric is data: a name and the pairs of events it
// can be computed from, the first pair the file has winning, so preset and perf names both work.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/table_format.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct EventPair {
  std::string_view numerator;
  std::string_view denominator;  // "" : the routine's inclusive time in seconds
};

struct CounterMetric {
  std::string_view key;    // JSON/CSV key, e.g. "ipc"
  std::string_view title;  // text column
  double scale;            // applied to numerator / denominator (100 for percentages)
  std::span<const EventPair> sources;
};

std::span<const CounterMetric> counter_metrics();

struct RoutineCounters {
  std::string name, kind;
  std::int64_t incl_ns = 0;
  std::map<std::string, double> incl;  // event -> inclusive count (recursive nodes left out)
  std::map<std::string, double> excl;
};

struct CounterReport {
  std::vector<std::string> events;            // recorded in the file, by name
  std::vector<const CounterMetric*> metrics;  // computable from those events
  std::vector<RoutineCounters> routines;      // by inclusive time, largest first
};

CounterReport compute_counter_report(const ProfileFile& file);
// nullopt when the routine lacks the events or the denominator is 0.
std::optional<double> metric_value(const CounterMetric& metric, const RoutineCounters& routine);

}  // namespace sonde::analyzers
