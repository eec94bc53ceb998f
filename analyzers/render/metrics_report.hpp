// `sonde metrics`: the derived metrics of docs/metrics.md as tables, one per section (roofline
// per routine, time per phase, the iteration breakdown, counter metrics, GPU kernels).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "base/table_format.hpp"
#include "metrics/breakdown.hpp"
#include "metrics/counter_metrics.hpp"
#include "metrics/gpu_summary.hpp"
#include "metrics/metrics.hpp"

namespace sonde::analyzers {

struct MetricsReport {
  Metrics metrics;
  Breakdown breakdown;
  CounterReport counters;
  GpuSummary gpu;
};

// Sections by name: roofline, phases, breakdown, counters, kernels, graphs; "all" is every one.
// Throws Error.
std::vector<std::string> parse_metrics_sections(std::string_view name);

MetricsReport compute_metrics_report(const ProfileFile& file,
                                     const std::vector<PhaseMapping>& mappings);
MetricsReport compute_metrics_report(LoadedProfile& profile,
                                     const std::vector<PhaseMapping>& mappings);
Table roofline_table(const Metrics& metrics, std::size_t top);  // routines with a cost model
Table phases_table(const Metrics& metrics, std::size_t top);
// TAU's tuning-candidate table: GPU kernels with their per-instruction metrics and those x time.
Table kernels_table(const GpuSummary& gpu, std::size_t top);
// CUDA graph replays by the call path their nodes were captured at, and the replaying call.
Table graphs_table(const GpuSummary& gpu, std::size_t top);
Table metrics_section_table(const MetricsReport& report, const std::string& section,
                            std::size_t top);

std::string render_metrics_text(const MetricsReport& report,
                                const std::vector<std::string>& sections, std::size_t top);
Json render_metrics_json(const MetricsReport& report, const std::vector<std::string>& sections,
                         std::size_t top);

}  // namespace sonde::analyzers
