#include "metrics/loaded_profile.hpp"

namespace sonde::analyzers {

const Forest& LoadedProfile::forest() {
  if (!forest_) forest_ = load_forest(*file_, false);
  return *forest_;
}

const Metrics& LoadedProfile::metrics() {
  // An idle thread's tree is its root alone: nothing under it for the metrics to add.
  if (!metrics_) metrics_ = compute_metrics(*file_, forest().busy);
  return *metrics_;
}

const GpuSummary& LoadedProfile::gpu() {
  if (!gpu_) gpu_ = load_gpu_summary(*file_);
  return *gpu_;
}

const RunSummary& LoadedProfile::run() {
  if (!run_) run_ = load_run_summary(*file_);
  return *run_;
}

}  // namespace sonde::analyzers
