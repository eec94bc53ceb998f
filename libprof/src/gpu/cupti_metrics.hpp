// Per-kernel hardware metrics (SONDE_GPU_METRICS) through CUPTI's range profiler: each kernel
// runs as one range (auto range), replayed as often as the metrics need (kernel replay), and is
// decoded and evaluated at its launch's API exit. Auto ranges are named "0", "1", ... (CUPTI's
// range profiler documentation), not after the kernel, so a range says nothing about which
// launch it was: at most one launch per context is profiled at a time, and a decode that holds
// anything but exactly one range is counted as lost rather than guessed at.
#pragma once

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "counters/counter_backend.hpp"  // NoteSink
#include "gpu/cupti_library.hpp"
#include "gpu/gpu_backend.hpp"  // MetricValues

namespace sonde {

// Added to every metrics configuration that measures anything: CUPTI delivers a replayed
// kernel's activity record without timestamps, so this is the launch's GPU time
// (gpu_activity_ns in the schema reads it).
inline constexpr const char* kDurationMetric = "gpu__time_duration.sum";
// The metrics of TAU's derived ratios (warps per instruction, global loads per instruction),
// asked for by the word `tau` in SONDE_GPU_METRICS.
inline constexpr const char* kTauMetrics[] = {"smsp__warps_launched.sum", "smsp__inst_executed.sum",
                                              "smsp__inst_executed_op_global_ld.sum"};

// SONDE_GPU_METRICS as given, with `tau` expanded and repeats removed, in order.
std::vector<std::string> expand_gpu_metrics(const std::vector<std::string>& requested);

class KernelMetrics {
 public:
  KernelMetrics(const CuptiLibrary& lib, std::vector<std::string> requested, NoteSink note)
      : lib_(lib), requested_(std::move(requested)), note_(std::move(note)) {}

  // Why a launch is not profiled although metrics are on.
  enum class Skip {
    kBusy,     // another launch on its context is being profiled (threads launching at once)
    kCapture,  // a stream capture is under way: the profiler's synchronisation would end it
    kWaits,    // an NCCL or cooperative kernel: it may wait for work that a replay never runs
  };

  // The context was created: its range profiler is enabled and configured now, outside any
  // launch (the samples' order: enable, counter data image, set config; then start/stop per
  // range, decode).
  void context_created(CUcontext context);
  // API entry of a kernel launch on `context`: true when the profiler was started for it (a
  // context created before sonde subscribed is set up here, at its first launch).
  bool launch_enter(CUcontext context, uint32_t correlation);
  // A launch not profiled, and why (run_info counts them).
  void skipped(Skip why);
  // API exit of a launch that launch_enter started: its range is decoded and evaluated, and
  // appended to `out` with its values when the decode holds exactly one range.
  void launch_exit(CUcontext context, uint32_t correlation,
                   std::vector<std::pair<uint32_t, MetricValues>>& out);

  // The context is being destroyed: its range profiler is stopped and disabled, and a context
  // made later with the same handle starts afresh.
  void context_destroyed(CUcontext context);

  // Running totals for run_info: the metrics evaluated, passes per kernel, launches measured,
  // and ranges lost.
  void info(std::vector<std::pair<std::string, std::string>>& out) const;

 private:
  struct Chip {  // host-side configuration, one per GPU model (std::map: stable addresses)
    CUpti_Profiler_Host_Object* host = nullptr;
    std::vector<std::string> metrics;  // the requested ones this chip knows
    std::vector<uint8_t> config;
    std::vector<uint8_t> availability;  // the counter availability image the host was given
    size_t passes = 0;
    bool ok = false;
  };
  struct Session {  // one per CUDA context
    CUpti_RangeProfiler_Object* object = nullptr;
    std::vector<uint8_t> counter_data;
    const Chip* chip = nullptr;  // the GPU model's configuration
    bool started = false;
    bool failed = false;     // set up failed: the context is not measured
    uint32_t in_flight = 0;  // correlation id of the launch being profiled, 0: none
  };

  Session* session(CUcontext context);  // under mu_; nullptr when not measured
  bool set_up(CUcontext context, Session& s);
  Chip* chip_for(CUcontext context);
  bool configure(Session& s);
  bool start(Session& s);
  CUptiResult stop(Session& s);
  bool evaluate(Session& s, uint32_t correlation,
                std::vector<std::pair<uint32_t, MetricValues>>& out);
  // Says `what` failed, in CUPTI's words, once per topic; false.
  bool fail(const std::string& what, CUptiResult rc);

  const CuptiLibrary& lib_;
  const std::vector<std::string> requested_;
  NoteSink note_;

  mutable std::mutex mu_;  // launches of every thread; never held across a launch
  bool disabled_ = false;  // the profiler is unusable in this process (said once)
  bool initialized_ = false;
  std::map<CUcontext, Session> sessions_;
  std::map<std::string, Chip> chips_;
  std::vector<std::string> noted_;
  uint64_t measured_ = 0, dropped_ = 0, unmatched_ = 0, not_finite_ = 0, ambiguous_ = 0;
  uint64_t skipped_[3] = {};  // by Skip
  size_t passes_ = 0;
  std::vector<std::string> evaluated_;  // the metrics of every chip seen, for run_info
};

}  // namespace sonde
