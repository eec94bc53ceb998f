// The stub libcupti's range profiler and profiler host API (CUDA 13): one device (a "GH100"), a
// fixed list of metrics, and counter data that the test program supplies per kernel
// (cupti_stub_kernel_run). The config and counter data images are the stub's own formats, opaque
// to the profiler as CUPTI's are. Auto ranges are named by their number, as CUPTI names them.
#include "cupti_stub.hpp"

using namespace cupti_stub;

namespace {

// ---- metrics ----

struct Metric {
  const char* name;
  const char* description;
  const char* dim_unit;
  CUpti_MetricType type;
};

constexpr Metric kMetrics[] = {
    {"smsp__warps_launched.sum", "# of warps launched", "warp", CUPTI_METRIC_TYPE_COUNTER},
    {"smsp__inst_executed.sum", "# of warp instructions executed", "inst",
     CUPTI_METRIC_TYPE_COUNTER},
    {"smsp__inst_executed_op_global_ld.sum", "# of warp instructions executed: global loads",
     "inst", CUPTI_METRIC_TYPE_COUNTER},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed",
     "SM throughput assuming ideal load balance", "%", CUPTI_METRIC_TYPE_THROUGHPUT},
    {"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
     "compute memory pipeline throughput", "%", CUPTI_METRIC_TYPE_THROUGHPUT},
    {"dram__bytes_read.sum", "# of bytes read from DRAM", "byte", CUPTI_METRIC_TYPE_COUNTER},
    {"gpu__time_duration.sum", "total duration in nanoseconds", "nsecond",
     CUPTI_METRIC_TYPE_COUNTER},
};

const Metric* find_metric(const char* name) {
  if (name == nullptr) return nullptr;
  for (const Metric& m : kMetrics) {
    if (std::strcmp(m.name, name) == 0) return &m;
  }
  return nullptr;
}

// What CUPTI names the chip of the stub's one device, and the counter availability image it
// hands out for it: recognisable, so that a profiler passing on a buffer it never had filled
// shows in a hex dump.
constexpr const char* kChipName = "GH100";
constexpr uint8_t kAvailability[16] = {'c', 'u', 'p', 't', 'i', '-', 's', 't',
                                       'u', 'b', '-', 'a', 'v', 'a', 'i', 'l'};

// The profiler host object: the metrics added to its config so far.
struct HostObject {
  std::vector<std::string> metrics;
};

HostObject* host(CUpti_Profiler_Host_Object* object) {
  return reinterpret_cast<HostObject*>(object);
}

// ---- config image: a magic line, then each metric name followed by '\n' ----

constexpr std::string_view kConfigMagic = "cupti-stub-config\n";

std::string config_image(const std::vector<std::string>& metrics) {
  std::string image(kConfigMagic);
  for (const std::string& m : metrics) image += m + '\n';
  return image;
}

bool parse_config(const uint8_t* image, size_t size, std::vector<std::string>* metrics) {
  if (image == nullptr) return false;
  std::string_view text(reinterpret_cast<const char*>(image), size);
  if (!text.starts_with(kConfigMagic)) return false;
  text.remove_prefix(kConfigMagic.size());
  metrics->clear();
  while (!text.empty()) {
    size_t end = text.find('\n');
    if (end == std::string_view::npos || end == 0) return false;
    metrics->emplace_back(text.substr(0, end));
    text.remove_prefix(end + 1);
  }
  return true;
}

// ---- counter data image: a header, then a fixed-size slot per range ----

constexpr size_t kMaxValues = 16;  // metrics per config
constexpr size_t kNameSize = 256;  // range and metric names, with their NUL
constexpr char kCounterMagic[8] = "stubcdi";

struct CounterHeader {
  char magic[8];
  uint64_t capacity;  // range slots
  uint64_t ranges;    // slots filled
  uint64_t num_metrics;
  // The metrics of the config the ranges were collected with, in the order of the slots' values:
  // the image says what its numbers are, whatever host object evaluates it.
  char metrics[kMaxValues][kNameSize];
};

struct RangeSlot {
  char name[kNameSize];
  double values[kMaxValues];
};

uint8_t* slot_at(uint8_t* image, size_t index) {
  return image + sizeof(CounterHeader) + index * sizeof(RangeSlot);
}
const uint8_t* slot_at(const uint8_t* image, size_t index) {
  return image + sizeof(CounterHeader) + index * sizeof(RangeSlot);
}

// The header of an image that CounterDataImageInitialize wrote; copied out, as the profiler's
// buffer need not be aligned for it.
bool read_header(const uint8_t* image, size_t size, CounterHeader* header) {
  if (image == nullptr || size < sizeof(CounterHeader)) return false;
  std::memcpy(header, image, sizeof(CounterHeader));
  return std::memcmp(header->magic, kCounterMagic, sizeof(kCounterMagic)) == 0 &&
         header->capacity <= (size - sizeof(CounterHeader)) / sizeof(RangeSlot) &&
         header->ranges <= header->capacity && header->num_metrics <= kMaxValues;
}

std::vector<std::string> header_metrics(const CounterHeader& header) {
  std::vector<std::string> metrics;
  for (size_t i = 0; i < header.num_metrics; ++i) metrics.emplace_back(header.metrics[i]);
  return metrics;
}

// The profiler behind a handle, if it is still enabled. Under s.mu.
RangeProfiler* profiler(Stub& s, CUpti_RangeProfiler_Object* object) {
  for (auto& p : s.profilers) {
    if (reinterpret_cast<CUpti_RangeProfiler_Object*>(p.get()) == object) return p.get();
  }
  return nullptr;
}

}  // namespace

// ---- device and profiler target ----

STUB_EXPORT CUptiResult cuptiGetDeviceId(CUcontext context, uint32_t* deviceId) {
  if (deviceId == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  *deviceId = 0;  // every context is on the stub's one device
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiDeviceGetChipName(CUpti_Device_GetChipName_Params* pParams) {
  if (!sized(pParams, CUpti_Device_GetChipName_Params_STRUCT_SIZE) || pParams->deviceIndex != 0) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  pParams->pChipName = kChipName;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiProfilerInitialize(CUpti_Profiler_Initialize_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_Initialize_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiProfilerDeInitialize(CUpti_Profiler_DeInitialize_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return CUPTI_SUCCESS;
}

// CUPTI's two calls: the size first (no buffer), then the image into a buffer of that size, the
// size then saying how much was copied.
STUB_EXPORT CUptiResult
cuptiProfilerGetCounterAvailability(CUpti_Profiler_GetCounterAvailability_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (pParams->pCounterAvailabilityImage == nullptr) {
    pParams->counterAvailabilityImageSize = sizeof(kAvailability);
    return CUPTI_SUCCESS;
  }
  if (pParams->counterAvailabilityImageSize < sizeof(kAvailability)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  std::memcpy(pParams->pCounterAvailabilityImage, kAvailability, sizeof(kAvailability));
  pParams->counterAvailabilityImageSize = sizeof(kAvailability);
  return CUPTI_SUCCESS;
}

// ---- profiler host ----

STUB_EXPORT CUptiResult
cuptiProfilerHostInitialize(CUpti_Profiler_Host_Initialize_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE) ||
      pParams->profilerType != CUPTI_PROFILER_TYPE_RANGE_PROFILER ||
      pParams->pChipName == nullptr || std::strcmp(pParams->pChipName, kChipName) != 0 ||
      pParams->pCounterAvailabilityImage == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  pParams->pHostObject = reinterpret_cast<CUpti_Profiler_Host_Object*>(new HostObject);
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult
cuptiProfilerHostDeinitialize(CUpti_Profiler_Host_Deinitialize_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE) ||
      pParams->pHostObject == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  delete host(pParams->pHostObject);
  pParams->pHostObject = nullptr;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult
cuptiProfilerHostGetMetricProperties(CUpti_Profiler_Host_GetMetricProperties_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE) ||
      pParams->pHostObject == nullptr || pParams->pMetricName == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  const Metric* m = find_metric(pParams->pMetricName);
  if (m == nullptr) return CUPTI_ERROR_INVALID_METRIC_NAME;
  // The unit the counters come from, as CUPTI names it: the metric name up to "__".
  static const std::vector<std::string> kUnits = [] {
    std::vector<std::string> units;
    for (const Metric& metric : kMetrics) {
      std::string_view name = metric.name;
      units.emplace_back(name.substr(0, name.find("__")));
    }
    return units;
  }();
  pParams->pDescription = m->description;
  pParams->pHwUnit = kUnits[size_t(m - kMetrics)].c_str();
  pParams->pDimUnit = m->dim_unit;
  pParams->metricType = m->type;
  return CUPTI_SUCCESS;
}

// All or nothing: one unknown name and the config stays as it was.
STUB_EXPORT CUptiResult
cuptiProfilerHostConfigAddMetrics(CUpti_Profiler_Host_ConfigAddMetrics_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE) ||
      pParams->pHostObject == nullptr ||
      (pParams->numMetrics > 0 && pParams->ppMetricNames == nullptr)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    if (find_metric(pParams->ppMetricNames[i]) == nullptr) return CUPTI_ERROR_INVALID_METRIC_NAME;
  }
  std::vector<std::string>& metrics = host(pParams->pHostObject)->metrics;
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    // A metric asked for twice is scheduled once.
    if (std::find(metrics.begin(), metrics.end(), pParams->ppMetricNames[i]) == metrics.end()) {
      metrics.emplace_back(pParams->ppMetricNames[i]);
    }
  }
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult
cuptiProfilerHostGetConfigImageSize(CUpti_Profiler_Host_GetConfigImageSize_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE) ||
      pParams->pHostObject == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  pParams->configImageSize = config_image(host(pParams->pHostObject)->metrics).size();
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult
cuptiProfilerHostGetConfigImage(CUpti_Profiler_Host_GetConfigImage_Params* pParams) {
  if (!sized(pParams, CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE) ||
      pParams->pHostObject == nullptr || pParams->pConfigImage == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  std::string image = config_image(host(pParams->pHostObject)->metrics);
  if (pParams->configImageSize < image.size()) return CUPTI_ERROR_INVALID_PARAMETER;
  std::memcpy(pParams->pConfigImage, image.data(), image.size());
  return CUPTI_SUCCESS;
}

// Two metrics' counters fit in one pass on the stub's GPU.
STUB_EXPORT CUptiResult
cuptiProfilerHostGetNumOfPasses(CUpti_Profiler_Host_GetNumOfPasses_Params* pParams) {
  std::vector<std::string> metrics;
  if (!sized(pParams, CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE) ||
      !parse_config(pParams->pConfigImage, pParams->configImageSize, &metrics)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  pParams->numOfPasses = (metrics.size() + 1) / 2;
  return CUPTI_SUCCESS;
}

// The name is CUPTI's allocation, which the caller frees.
STUB_EXPORT CUptiResult
cuptiProfilerHostGetRangeName(CUpti_Profiler_Host_GetRangeName_Params* pParams) {
  CounterHeader header;
  if (!sized(pParams, CUpti_Profiler_Host_GetRangeName_Params_STRUCT_SIZE) ||
      !read_header(pParams->pCounterDataImage, pParams->counterDataImageSize, &header) ||
      pParams->rangeIndex >= header.ranges) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  RangeSlot slot;
  std::memcpy(&slot, slot_at(pParams->pCounterDataImage, pParams->rangeIndex), sizeof(slot));
  pParams->pRangeName = strdup(slot.name);
  return pParams->pRangeName != nullptr ? CUPTI_SUCCESS : CUPTI_ERROR_OUT_OF_MEMORY;
}

STUB_EXPORT CUptiResult
cuptiProfilerHostEvaluateToGpuValues(CUpti_Profiler_Host_EvaluateToGpuValues_Params* pParams) {
  CounterHeader header;
  if (!sized(pParams, CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE) ||
      pParams->pHostObject == nullptr ||
      !read_header(pParams->pCounterDataImage, pParams->counterDataImageSize, &header) ||
      pParams->rangeIndex >= header.ranges ||
      (pParams->numMetrics > 0 &&
       (pParams->ppMetricNames == nullptr || pParams->pMetricValues == nullptr))) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  const std::vector<std::string>& config = host(pParams->pHostObject)->metrics;
  std::vector<std::string> collected = header_metrics(header);
  std::vector<size_t> columns;
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    const char* name = pParams->ppMetricNames[i];
    auto column = std::find(collected.begin(), collected.end(), name ? name : "");
    // A metric outside the host object's config, or one the image was not collected with.
    if (name == nullptr || std::find(config.begin(), config.end(), name) == config.end() ||
        column == collected.end()) {
      return CUPTI_ERROR_INVALID_METRIC_NAME;
    }
    columns.push_back(size_t(column - collected.begin()));
  }
  RangeSlot slot;
  std::memcpy(&slot, slot_at(pParams->pCounterDataImage, pParams->rangeIndex), sizeof(slot));
  for (size_t i = 0; i < columns.size(); ++i) pParams->pMetricValues[i] = slot.values[columns[i]];
  return CUPTI_SUCCESS;
}

// ---- range profiler ----

STUB_EXPORT CUptiResult cuptiRangeProfilerEnable(CUpti_RangeProfiler_Enable_Params* pParams) {
  if (!sized(pParams, CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  // What CUPTI answers when the driver keeps GPU performance counters to admin users.
  if (std::getenv("CUPTI_STUB_NO_PROFILER") != nullptr) return CUPTI_ERROR_INSUFFICIENT_PRIVILEGES;
  // No context: the current one, which in the stub is always its default context.
  CUcontext context =
      pParams->ctx != nullptr ? pParams->ctx : reinterpret_cast<CUcontext>(kDefaultContext);
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  for (auto& p : s.profilers) {
    if (p->context == context) return CUPTI_ERROR_INVALID_OPERATION;
  }
  s.profilers.push_back(std::make_unique<RangeProfiler>());
  s.profilers.back()->context = context;
  pParams->pRangeProfilerObject =
      reinterpret_cast<CUpti_RangeProfiler_Object*>(s.profilers.back().get());
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiRangeProfilerDisable(CUpti_RangeProfiler_Disable_Params* pParams) {
  if (!sized(pParams, CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  RangeProfiler* p = profiler(s, pParams->pRangeProfilerObject);
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  std::erase_if(s.profilers, [p](const auto& q) { return q.get() == p; });
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult
cuptiRangeProfilerGetCounterDataSize(CUpti_RangeProfiler_GetCounterDataSize_Params* pParams) {
  if (!sized(pParams, CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE) ||
      pParams->maxNumOfRanges == 0 || pParams->numMetrics > kMaxValues ||
      (pParams->numMetrics > 0 && pParams->pMetricNames == nullptr)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  for (size_t i = 0; i < pParams->numMetrics; ++i) {
    if (find_metric(pParams->pMetricNames[i]) == nullptr) return CUPTI_ERROR_INVALID_METRIC_NAME;
  }
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  if (profiler(s, pParams->pRangeProfilerObject) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  pParams->counterDataSize = sizeof(CounterHeader) + pParams->maxNumOfRanges * sizeof(RangeSlot);
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiRangeProfilerCounterDataImageInitialize(
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params* pParams) {
  if (!sized(pParams, CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE) ||
      pParams->pCounterData == nullptr || pParams->counterDataSize < sizeof(CounterHeader)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  if (profiler(s, pParams->pRangeProfilerObject) == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  CounterHeader header{};
  std::memcpy(header.magic, kCounterMagic, sizeof(kCounterMagic));
  header.capacity = (pParams->counterDataSize - sizeof(CounterHeader)) / sizeof(RangeSlot);
  std::memset(pParams->pCounterData, 0, pParams->counterDataSize);
  std::memcpy(pParams->pCounterData, &header, sizeof(header));
  return CUPTI_SUCCESS;
}

// The stub profiles each kernel as a range of its own (auto range), replaying it for every pass
// (kernel replay); the other modes need the application's help, which no test gives.
STUB_EXPORT CUptiResult cuptiRangeProfilerSetConfig(CUpti_RangeProfiler_SetConfig_Params* pParams) {
  if (!sized(pParams, CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (pParams->range != CUPTI_AutoRange || pParams->replayMode != CUPTI_KernelReplay) {
    return CUPTI_ERROR_NOT_SUPPORTED;
  }
  std::vector<std::string> metrics;
  CounterHeader header;
  if (!parse_config(pParams->pConfig, pParams->configSize, &metrics) ||
      metrics.size() > kMaxValues ||
      !read_header(pParams->pCounterDataImage, pParams->counterDataImageSize, &header)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  // An image holds the values of one config: ranges of another would be read as the wrong metrics.
  if (header.ranges > 0 && header_metrics(header) != metrics) return CUPTI_ERROR_INVALID_PARAMETER;
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  RangeProfiler* p = profiler(s, pParams->pRangeProfilerObject);
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (p->started || (!p->collected.empty() && p->metrics != metrics)) {
    return CUPTI_ERROR_INVALID_OPERATION;
  }
  header.num_metrics = metrics.size();
  for (size_t i = 0; i < metrics.size(); ++i) {
    std::snprintf(header.metrics[i], kNameSize, "%s", metrics[i].c_str());
  }
  std::memcpy(pParams->pCounterDataImage, &header, sizeof(header));
  p->configured = true;
  p->metrics = std::move(metrics);
  p->image = pParams->pCounterDataImage;
  p->image_size = pParams->counterDataImageSize;
  p->max_ranges_per_pass = pParams->maxRangesPerPass;
  p->next_range = 0;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiRangeProfilerStart(CUpti_RangeProfiler_Start_Params* pParams) {
  if (!sized(pParams, CUpti_RangeProfiler_Start_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  RangeProfiler* p = profiler(s, pParams->pRangeProfilerObject);
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (!p->configured || p->started) return CUPTI_ERROR_INVALID_OPERATION;
  // The range profiler synchronises the context, which ends a stream capture under way with
  // cudaErrorStreamCaptureInvalidated.
  if (s.capturing > 0) s.capture_invalidated = true;
  p->started = true;
  return CUPTI_SUCCESS;
}

// Kernel replay runs every pass within each launch, so all passes are in once profiling stops.
STUB_EXPORT CUptiResult cuptiRangeProfilerStop(CUpti_RangeProfiler_Stop_Params* pParams) {
  if (!sized(pParams, CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  RangeProfiler* p = profiler(s, pParams->pRangeProfilerObject);
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (!p->started) return CUPTI_ERROR_INVALID_OPERATION;
  if (s.capturing > 0) s.capture_invalidated = true;
  p->started = false;
  pParams->passIndex = 0;
  pParams->targetNestingLevel = 1;
  pParams->isAllPassSubmitted = 1;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiRangeProfilerPushRange(CUpti_RangeProfiler_PushRange_Params*) {
  return CUPTI_ERROR_NOT_SUPPORTED;  // auto range only
}

STUB_EXPORT CUptiResult cuptiRangeProfilerPopRange(CUpti_RangeProfiler_PopRange_Params*) {
  return CUPTI_ERROR_NOT_SUPPORTED;  // auto range only
}

// The ranges collected so far go into the image given to SetConfig, after those already there;
// those that do not fit are lost, and counted.
STUB_EXPORT CUptiResult
cuptiRangeProfilerDecodeData(CUpti_RangeProfiler_DecodeData_Params* pParams) {
  if (!sized(pParams, CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  RangeProfiler* p = profiler(s, pParams->pRangeProfilerObject);
  if (p == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (!p->configured) return CUPTI_ERROR_INVALID_OPERATION;
  CounterHeader header;
  if (!read_header(p->image, p->image_size, &header)) return CUPTI_ERROR_INVALID_PARAMETER;
  size_t dropped = 0;
  for (const RangeProfiler::Range& range : p->collected) {
    if (header.ranges == header.capacity) {
      ++dropped;
      continue;
    }
    RangeSlot slot{};
    std::snprintf(slot.name, kNameSize, "%s", range.name.c_str());
    std::copy(range.values.begin(), range.values.end(), slot.values);
    std::memcpy(slot_at(p->image, header.ranges++), &slot, sizeof(slot));
  }
  p->collected.clear();
  std::memcpy(p->image, &header, sizeof(header));
  pParams->numOfRangeDropped = dropped;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult
cuptiRangeProfilerGetCounterDataInfo(CUpti_RangeProfiler_GetCounterDataInfo_Params* pParams) {
  CounterHeader header;
  if (!sized(pParams, CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE) ||
      !read_header(pParams->pCounterDataImage, pParams->counterDataImageSize, &header)) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  pParams->numTotalRanges = header.ranges;
  return CUPTI_SUCCESS;
}

// The name points into the image, so it lives as long as the profiler keeps the image.
STUB_EXPORT CUptiResult cuptiRangeProfilerCounterDataGetRangeInfo(
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params* pParams) {
  CounterHeader header;
  if (!sized(pParams, CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE) ||
      !read_header(pParams->pCounterDataImage, pParams->counterDataImageSize, &header) ||
      pParams->rangeIndex >= header.ranges) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  pParams->rangeName = reinterpret_cast<const char*>(
      slot_at(pParams->pCounterDataImage, pParams->rangeIndex) + offsetof(RangeSlot, name));
  return CUPTI_SUCCESS;
}

// 1 when a range profiler is enabled and configured on `context`.
STUB_EXPORT int cupti_stub_profiler_ready(uintptr_t context) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  for (auto& p : s.profilers) {
    if (p->context == reinterpret_cast<CUcontext>(context) && p->configured) return 1;
  }
  return 0;
}

// The GPU ran kernel `name` on `context` just now: a range profiler started there records it as a
// range of its own, named by its number as CUPTI names auto ranges (not after the kernel), with
// the value given for each metric of its config (0 for one not given).
// Returns 1 when a profiler recorded it, 0 when none was profiling.
STUB_EXPORT int cupti_stub_kernel_run(uintptr_t context, const char* name,
                                      const char* const* metric_names, const double* values,
                                      int n) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  for (auto& p : s.profilers) {
    if (p->context != reinterpret_cast<CUcontext>(context) || !p->started) continue;
    RangeProfiler::Range range{std::to_string(p->next_range++), {}};
    for (const std::string& metric : p->metrics) {
      double value = 0;
      for (int i = 0; i < n; ++i) {
        if (metric_names[i] != nullptr && metric == metric_names[i]) value = values[i];
      }
      range.values.push_back(value);
    }
    p->collected.push_back(std::move(range));
    s.replayed.push_back(name);
    return 1;
  }
  return 0;
}
