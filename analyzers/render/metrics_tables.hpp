// The tables of sonde metrics' breakdown and counters sections, over what compute_breakdown
// and compute_counter_report found; render/metrics_report.cpp prints them.
#pragma once

#include <cstddef>

#include "base/table_format.hpp"
#include "metrics/breakdown.hpp"
#include "metrics/counter_metrics.hpp"

namespace sonde::analyzers {

// Empty when no loop was found (the caller prints `reason`). With GPU activity it has the
// device time beside the host time (gpu_s, gpu ms/iter).
Table breakdown_table(const Breakdown& b);
// One row per device of gpu_overlap; empty when no NCCL kernel ran in the iterations.
Table breakdown_overlap_table(const Breakdown& b);
// One row per routine: time, the derived metrics, then the raw inclusive events.
Table counter_table(const CounterReport& report, std::size_t top);

}  // namespace sonde::analyzers
