// Per-kernel hardware metrics (SONDE_GPU_METRICS) through CUPTI's range profiler: every kernel
// launch is one range (auto range), replayed as often as the metrics need (kernel replay), and
// decoded and evaluated at the launch's API exit, so each value belongs to one launch and,
// through its correlation id, to one call path and one activity record.
#pragma once

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_range_profiler.h>

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "counters/counter_backend.hpp"  // NoteSink
#include "gpu/cupti_library.hpp"
#include "gpu/gpu_backend.hpp"  // MetricValues

namespace sonde {

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

  // API entry of a kernel launch on `context`: the context's range profiler is set up on its
  // first launch and started. `symbol` is the kernel's name as CUPTI gives it (may be null).
  void launch_enter(CUcontext context, uint32_t correlation, const char* symbol);
  // API exit of that launch: the ranges recorded since the entry are decoded and evaluated;
  // each launch they belong to is appended to `out` with its values.
  void launch_exit(CUcontext context, uint32_t correlation,
                   std::vector<std::pair<uint32_t, MetricValues>>& out);

  // The context is being destroyed: its range profiler is stopped and disabled, and a context
  // made later with the same handle starts afresh.
  void context_destroyed(CUcontext context);

  // Running totals for run_info: the metrics evaluated, passes per kernel, launches measured,
  // and ranges lost.
  void info(std::vector<std::pair<std::string, std::string>>& out) const;

 private:
  struct Pending {
    uint32_t correlation;
    std::string symbol;
  };
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
    bool failed = false;  // set up failed: the context is not measured
    std::deque<Pending> pending;
  };

  bool set_up(CUcontext context, Session& s);
  Chip* chip_for(CUcontext context);
  bool configure(Session& s);
  bool start(Session& s);
  CUptiResult stop(Session& s);
  bool evaluate(Session& s, std::vector<std::pair<uint32_t, MetricValues>>& out);
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
  uint64_t measured_ = 0, dropped_ = 0, unmatched_ = 0, not_finite_ = 0;
  size_t passes_ = 0;
  std::vector<std::string> evaluated_;  // the metrics of every chip seen, for run_info
};

}  // namespace sonde
