// The range profiler's life per CUDA context: set up when the context is created (or at its
// first launch when it predates sonde's subscription: chip name, counter availability, host
// configuration of the metrics, counter data image), started at a launch's entry, stopped,
// decoded and evaluated at its exit. Whatever fails is
// said once in CUPTI's words and switches metrics off; kernels and copies are still recorded.
#include "gpu/cupti_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/signal_block.hpp"

namespace sonde {

namespace {
// Ranges one counter data image holds: a launch decodes its own range at its exit, so more
// than one appears only when another thread's kernel ran on the context inside the window.
constexpr size_t kMaxRanges = 16;

// CUPTI's parameter structs: zeroed, with the size of the fields this build knows.
template <class Params>
Params params(size_t struct_size) {
  Params p{};
  p.structSize = struct_size;
  return p;
}
}  // namespace

std::vector<std::string> expand_gpu_metrics(const std::vector<std::string>& requested) {
  std::vector<std::string> out;
  auto add = [&](const std::string& m) {
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  };
  for (const std::string& m : requested) {
    if (m == "tau") {
      for (const char* t : kTauMetrics) add(t);
    } else {
      add(m);
    }
  }
  return out;
}

bool KernelMetrics::fail(const std::string& what, CUptiResult rc) {
  std::string why = lib_.describe(rc);
  std::string hint;
  if (rc == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
    hint =
        " (GPU performance counters are restricted to administrators: see NVIDIA's "
        "ERR_NVGPUCTRPERM, driver option NVreg_RestrictProfilingToAdminUsers=0)";
  }
  note_("gpu-metrics", fmt::format("GPU metrics are not recorded: {} failed: {}{}; kernels and "
                                   "copies still are",
                                   what, why, hint));
  return false;
}

KernelMetrics::Chip* KernelMetrics::chip_for(CUcontext context) {
  uint32_t device = 0;
  CUptiResult rc = lib_.cuptiGetDeviceId(context, &device);
  if (rc != CUPTI_SUCCESS) return fail("cuptiGetDeviceId", rc), nullptr;
  auto name = params<CUpti_Device_GetChipName_Params>(CUpti_Device_GetChipName_Params_STRUCT_SIZE);
  name.deviceIndex = device;
  rc = lib_.cuptiDeviceGetChipName(&name);
  if (rc != CUPTI_SUCCESS || name.pChipName == nullptr) {
    return fail("cuptiDeviceGetChipName", rc), nullptr;
  }
  auto [it, added] = chips_.try_emplace(name.pChipName);
  Chip& chip = it->second;
  if (!added) return chip.ok ? &chip : nullptr;

  // The host side needs the counters this context can reach: ask for the size, then the image.
  auto avail = params<CUpti_Profiler_GetCounterAvailability_Params>(
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE);
  avail.ctx = context;
  rc = lib_.cuptiProfilerGetCounterAvailability(&avail);
  if (rc != CUPTI_SUCCESS) return fail("cuptiProfilerGetCounterAvailability", rc), nullptr;
  chip.availability.resize(avail.counterAvailabilityImageSize);
  avail.pCounterAvailabilityImage = chip.availability.data();
  rc = lib_.cuptiProfilerGetCounterAvailability(&avail);
  if (rc != CUPTI_SUCCESS) return fail("cuptiProfilerGetCounterAvailability", rc), nullptr;

  auto init = params<CUpti_Profiler_Host_Initialize_Params>(
      CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE);
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = it->first.c_str();
  init.pCounterAvailabilityImage = chip.availability.data();
  rc = lib_.cuptiProfilerHostInitialize(&init);
  if (rc != CUPTI_SUCCESS) return fail("cuptiProfilerHostInitialize", rc), nullptr;
  chip.host = init.pHostObject;

  auto known = [&](const char* metric) {
    auto props = params<CUpti_Profiler_Host_GetMetricProperties_Params>(
        CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE);
    props.pHostObject = chip.host;
    props.pMetricName = metric;
    return lib_.cuptiProfilerHostGetMetricProperties(&props);
  };
  // Each unknown name is said once and skipped; the others are still measured.
  for (const std::string& m : requested_) {
    rc = known(m.c_str());
    if (rc == CUPTI_SUCCESS) {
      chip.metrics.push_back(m);
    } else {
      note_("gpu-metrics", fmt::format("GPU metric '{}' is not available on {}: {}; skipped", m,
                                       it->first, lib_.describe(rc)));
    }
  }
  if (!chip.metrics.empty() &&
      std::find(chip.metrics.begin(), chip.metrics.end(), kDurationMetric) == chip.metrics.end() &&
      known(kDurationMetric) == CUPTI_SUCCESS) {
    chip.metrics.push_back(kDurationMetric);
  }
  if (chip.metrics.empty()) {
    note_("gpu-metrics", fmt::format("none of the GPU metrics asked for (SONDE_GPU_METRICS) is "
                                     "available on {}; no metrics are recorded",
                                     it->first));
    return nullptr;
  }
  std::vector<const char*> names;
  for (const std::string& m : chip.metrics) names.push_back(m.c_str());
  auto add = params<CUpti_Profiler_Host_ConfigAddMetrics_Params>(
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE);
  add.pHostObject = chip.host;
  add.ppMetricNames = names.data();
  add.numMetrics = names.size();
  rc = lib_.cuptiProfilerHostConfigAddMetrics(&add);
  if (rc != CUPTI_SUCCESS) return fail("cuptiProfilerHostConfigAddMetrics", rc), nullptr;
  auto size = params<CUpti_Profiler_Host_GetConfigImageSize_Params>(
      CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE);
  size.pHostObject = chip.host;
  rc = lib_.cuptiProfilerHostGetConfigImageSize(&size);
  if (rc != CUPTI_SUCCESS) return fail("cuptiProfilerHostGetConfigImageSize", rc), nullptr;
  chip.config.resize(size.configImageSize);
  auto config = params<CUpti_Profiler_Host_GetConfigImage_Params>(
      CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE);
  config.pHostObject = chip.host;
  config.configImageSize = chip.config.size();
  config.pConfigImage = chip.config.data();
  rc = lib_.cuptiProfilerHostGetConfigImage(&config);
  if (rc != CUPTI_SUCCESS) return fail("cuptiProfilerHostGetConfigImage", rc), nullptr;
  auto passes = params<CUpti_Profiler_Host_GetNumOfPasses_Params>(
      CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE);
  passes.configImageSize = chip.config.size();
  passes.pConfigImage = chip.config.data();
  if (lib_.cuptiProfilerHostGetNumOfPasses(&passes) == CUPTI_SUCCESS) {
    chip.passes = passes.numOfPasses;
    passes_ = std::max(passes_, chip.passes);
  }
  for (const std::string& m : chip.metrics) {
    if (std::find(evaluated_.begin(), evaluated_.end(), m) == evaluated_.end()) {
      evaluated_.push_back(m);
    }
  }
  chip.ok = true;
  return &chip;
}

// A fresh counter data image and the configuration that writes into it.
bool KernelMetrics::configure(Session& s) {
  auto init = params<CUpti_RangeProfiler_CounterDataImage_Initialize_Params>(
      CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE);
  init.pRangeProfilerObject = s.object;
  init.counterDataSize = s.counter_data.size();
  init.pCounterData = s.counter_data.data();
  CUptiResult rc = lib_.cuptiRangeProfilerCounterDataImageInitialize(&init);
  if (rc != CUPTI_SUCCESS) return fail("cuptiRangeProfilerCounterDataImageInitialize", rc);
  auto config = params<CUpti_RangeProfiler_SetConfig_Params>(
      CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE);
  config.pRangeProfilerObject = s.object;
  config.configSize = s.chip->config.size();
  config.pConfig = s.chip->config.data();
  config.counterDataImageSize = s.counter_data.size();
  config.pCounterDataImage = s.counter_data.data();
  config.range = CUPTI_AutoRange;
  config.replayMode = CUPTI_KernelReplay;
  config.maxRangesPerPass = kMaxRanges;
  config.numNestingLevels = 1;
  config.minNestingLevel = 1;
  config.passIndex = 0;
  config.targetNestingLevel = 1;
  rc = lib_.cuptiRangeProfilerSetConfig(&config);
  if (rc != CUPTI_SUCCESS) return fail("cuptiRangeProfilerSetConfig", rc);
  return true;
}

bool KernelMetrics::set_up(CUcontext context, Session& s) {
  if (!initialized_) {
    auto init =
        params<CUpti_Profiler_Initialize_Params>(CUpti_Profiler_Initialize_Params_STRUCT_SIZE);
    CUptiResult rc = lib_.cuptiProfilerInitialize(&init);
    if (rc != CUPTI_SUCCESS) return fail("cuptiProfilerInitialize", rc);
    initialized_ = true;
  }
  Chip* chip = chip_for(context);
  if (chip == nullptr) return false;
  s.chip = chip;
  auto enable =
      params<CUpti_RangeProfiler_Enable_Params>(CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE);
  enable.ctx = context;
  CUptiResult rc = lib_.cuptiRangeProfilerEnable(&enable);
  if (rc != CUPTI_SUCCESS) {
    // Said once; other contexts (another device) may still be measured.
    fail("cuptiRangeProfilerEnable", rc);
    s.failed = true;
    return true;
  }
  s.object = enable.pRangeProfilerObject;
  std::vector<const char*> names;
  for (const std::string& m : chip->metrics) names.push_back(m.c_str());
  auto size = params<CUpti_RangeProfiler_GetCounterDataSize_Params>(
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE);
  size.pRangeProfilerObject = s.object;
  size.pMetricNames = names.data();
  size.numMetrics = names.size();
  size.maxNumOfRanges = kMaxRanges;
  size.maxNumRangeTreeNodes = kMaxRanges;
  rc = lib_.cuptiRangeProfilerGetCounterDataSize(&size);
  if (rc != CUPTI_SUCCESS) return fail("cuptiRangeProfilerGetCounterDataSize", rc);
  s.counter_data.assign(size.counterDataSize, 0);
  return configure(s);
}

KernelMetrics::Session* KernelMetrics::session(CUcontext context) {
  if (disabled_ || context == nullptr) return nullptr;
  auto [it, added] = sessions_.try_emplace(context);
  Session& s = it->second;
  if (added && !set_up(context, s)) {
    // Whatever failed would fail again on every context: one note, then nothing more.
    s.failed = disabled_ = true;
  }
  return s.failed ? nullptr : &s;
}

void KernelMetrics::context_created(CUcontext context) {
  AsyncSignalBlock no_signals;
  std::lock_guard lock(mu_);
  session(context);
}

bool KernelMetrics::launch_enter(CUcontext context, uint32_t correlation) {
  // A flush on SIGTERM reads info() under this lock: the signal waits until it is released.
  AsyncSignalBlock no_signals;
  std::lock_guard lock(mu_);
  Session* s = session(context);
  if (s == nullptr) return false;
  if (s->in_flight != 0) {
    // Its kernel may still run inside the other launch's range and make that decode
    // ambiguous, which evaluate() counts.
    ++skipped_[int(Skip::kBusy)];
    return false;
  }
  if (!start(*s)) return false;
  s->in_flight = correlation;
  return true;
}

void KernelMetrics::skipped(Skip why) {
  AsyncSignalBlock no_signals;
  std::lock_guard lock(mu_);
  ++skipped_[int(why)];
}

bool KernelMetrics::start(Session& s) {
  if (s.started) return true;
  auto start =
      params<CUpti_RangeProfiler_Start_Params>(CUpti_RangeProfiler_Start_Params_STRUCT_SIZE);
  start.pRangeProfilerObject = s.object;
  CUptiResult rc = lib_.cuptiRangeProfilerStart(&start);
  if (rc != CUPTI_SUCCESS) {
    s.failed = disabled_ = true;
    return fail("cuptiRangeProfilerStart", rc);
  }
  s.started = true;
  return true;
}

CUptiResult KernelMetrics::stop(Session& s) {
  auto stop = params<CUpti_RangeProfiler_Stop_Params>(CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE);
  stop.pRangeProfilerObject = s.object;
  s.started = false;
  return lib_.cuptiRangeProfilerStop(&stop);
}

void KernelMetrics::launch_exit(CUcontext context, uint32_t correlation,
                                std::vector<std::pair<uint32_t, MetricValues>>& out) {
  if (context == nullptr) return;
  AsyncSignalBlock no_signals;
  std::lock_guard lock(mu_);
  auto it = sessions_.find(context);
  if (it == sessions_.end() || it->second.failed || it->second.in_flight != correlation) return;
  Session& s = it->second;
  s.in_flight = 0;
  CUptiResult rc = stop(s);
  if (rc != CUPTI_SUCCESS) {
    s.failed = disabled_ = true;
    fail("cuptiRangeProfilerStop", rc);
    return;
  }
  auto decode = params<CUpti_RangeProfiler_DecodeData_Params>(
      CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE);
  decode.pRangeProfilerObject = s.object;
  rc = lib_.cuptiRangeProfilerDecodeData(&decode);
  if (rc != CUPTI_SUCCESS) {
    s.failed = disabled_ = true;
    fail("cuptiRangeProfilerDecodeData", rc);
    return;
  }
  dropped_ += decode.numOfRangeDropped;
  // A fresh image for the next launch: the decoded ranges are read before it is initialised.
  if (!evaluate(s, correlation, out) || !configure(s)) s.failed = disabled_ = true;
}

bool KernelMetrics::evaluate(Session& s, uint32_t correlation,
                             std::vector<std::pair<uint32_t, MetricValues>>& out) {
  auto info = params<CUpti_RangeProfiler_GetCounterDataInfo_Params>(
      CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE);
  info.pCounterDataImage = s.counter_data.data();
  info.counterDataImageSize = s.counter_data.size();
  CUptiResult rc = lib_.cuptiRangeProfilerGetCounterDataInfo(&info);
  if (rc != CUPTI_SUCCESS) return fail("cuptiRangeProfilerGetCounterDataInfo", rc);
  if (info.numTotalRanges != 1) {
    // None: the launch failed. More: another thread's kernel ran on this context inside the
    // range window, and auto ranges are named by number, so which one is ours is unknowable.
    ++unmatched_;
    if (info.numTotalRanges > 1) ++ambiguous_;
    return true;
  }
  const std::vector<std::string>& metrics = s.chip->metrics;
  std::vector<const char*> names;
  for (const std::string& m : metrics) names.push_back(m.c_str());
  std::vector<double> values(names.size());
  auto eval = params<CUpti_Profiler_Host_EvaluateToGpuValues_Params>(
      CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE);
  eval.pHostObject = s.chip->host;
  eval.pCounterDataImage = s.counter_data.data();
  eval.counterDataImageSize = s.counter_data.size();
  eval.rangeIndex = 0;
  eval.ppMetricNames = names.data();
  eval.numMetrics = names.size();
  eval.pMetricValues = values.data();
  rc = lib_.cuptiProfilerHostEvaluateToGpuValues(&eval);
  if (rc != CUPTI_SUCCESS) {
    ++unmatched_;
    return fail("cuptiProfilerHostEvaluateToGpuValues", rc);
  }
  // A ratio over nothing (a hit rate of a kernel without accesses) evaluates to NaN: it is
  // left out, as the file has no value for it.
  MetricValues v;
  for (size_t i = 0; i < names.size(); ++i) {
    if (std::isfinite(values[i])) {
      v.emplace_back(metrics[i], values[i]);
    } else {
      ++not_finite_;
    }
  }
  out.emplace_back(correlation, std::move(v));
  ++measured_;
  return true;
}

void KernelMetrics::context_destroyed(CUcontext context) {
  AsyncSignalBlock no_signals;
  std::lock_guard lock(mu_);
  auto it = sessions_.find(context);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  if (s.object != nullptr) {
    if (s.started) stop(s);
    auto disable =
        params<CUpti_RangeProfiler_Disable_Params>(CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE);
    disable.pRangeProfilerObject = s.object;
    lib_.cuptiRangeProfilerDisable(&disable);
  }
  unmatched_ += s.in_flight != 0;
  sessions_.erase(it);
}

void KernelMetrics::info(std::vector<std::pair<std::string, std::string>>& out) const {
  AsyncSignalBlock no_signals;
  std::lock_guard lock(mu_);
  if (evaluated_.empty()) return;
  out.emplace_back("gpu.metrics", fmt::format("{}", fmt::join(evaluated_, ",")));
  out.emplace_back("gpu.metric_passes", std::to_string(passes_));
  out.emplace_back("gpu.metric_launches", std::to_string(measured_));
  // Launches that got no values (their range was dropped, or their launch failed).
  out.emplace_back("gpu.metric_lost", std::to_string(unmatched_));
  out.emplace_back("gpu.metric_ranges_dropped", std::to_string(dropped_));
  // Decodes holding several ranges (a kernel of another thread ran inside the window).
  out.emplace_back("gpu.metric_ambiguous", std::to_string(ambiguous_));
  // Launches not profiled: another on the context was; a stream capture was under way; NCCL
  // or cooperative kernels, which may wait on work that a replay does not repeat.
  out.emplace_back("gpu.metric_skipped_busy", std::to_string(skipped_[int(Skip::kBusy)]));
  out.emplace_back("gpu.metric_skipped_capture", std::to_string(skipped_[int(Skip::kCapture)]));
  out.emplace_back("gpu.metric_skipped_waiting", std::to_string(skipped_[int(Skip::kWaits)]));
  out.emplace_back("gpu.metric_not_finite", std::to_string(not_finite_));
}

}  // namespace sonde
