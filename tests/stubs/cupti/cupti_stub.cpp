// A stand-in for libcupti.so.13 on machines without a GPU, compiled against the real CUPTI
// headers: it keeps one subscriber, calls it back when the test program says that an API call
// happened, and fills the activity buffers sonde handed it with real CUpti_Activity* records
// when the test program says that the GPU ran something.
//
// Test-only behaviour comes from the environment, read here and never by sonde:
//   CUPTI_STUB_HELD_BY=name   another tool holds CUPTI: cuptiSubscribe_v2 refuses and names it
//   CUPTI_STUB_NO_DEVICE=1    a driver but no usable device: activity tracing cannot start
//   CUPTI_STUB_NO_PROFILER=1  performance counters are for admin users only: range profiling
//                             cannot start (cuptiRangeProfilerEnable, as cupti_range_profiler.h
//                             documents)
//   CUPTI_STUB_VERSION=n      cuptiGetVersion's answer; from 130200 a subscriber that sets
//                             allowMultipleSubscribers joins one already there (CUDA 13.2)
//   CUPTI_STUB_RECORDS_PER_BUFFER=n  a buffer is complete after n records and handed back from
//                             the stub's own thread, as CUPTI's worker thread does
//   CUPTI_STUB_FLUSH_HANG=1   a forced cuptiActivityFlushAll never returns (a known CUPTI hang)
//
// It also stands in for the CUDA 13 range profiler and profiler host APIs: one device (a
// "GH100"), a fixed list of metrics, and counter data that the test program supplies per kernel
// (cupti_stub_kernel_run). The config and counter data images are the stub's own formats, opaque
// to the profiler as CUPTI's are.
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#define STUB_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The one context the stub's "GPU" runs on unless the test program names another.
constexpr uintptr_t kDefaultContext = 0x1000;

// The range profiler on one context; the CUpti_RangeProfiler_Object* handed out is its address.
struct RangeProfiler {
  struct Range {
    std::string name;
    std::vector<double> values;  // in the order of `metrics`
  };
  CUcontext context = nullptr;
  bool configured = false, started = false;
  uint64_t next_range = 0;           // auto ranges are named "0", "1", ... in the order kernels ran
  std::vector<std::string> metrics;  // of the config image given to SetConfig
  uint8_t* image = nullptr;          // the counter data image given to SetConfig
  size_t image_size = 0;
  size_t max_ranges_per_pass = 0;
  std::vector<Range> collected;  // since Start, until DecodeData moves them into `image`
};

struct Stub {
  std::mutex mu;
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  bool domains[CUPTI_CB_DOMAIN_SIZE] = {};
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;
  bool kinds[64] = {};
  uint8_t* buffer = nullptr;  // the buffer being filled
  size_t size = 0, used = 0;
  std::vector<std::pair<uint8_t*, size_t>> full;
  std::vector<std::string*> names;  // kernel names stay valid, as CUPTI's do
  uint64_t dropped = 0;
  std::vector<std::unique_ptr<RangeProfiler>> profilers;  // under mu
  int capturing = 0;                                      // stream captures under way
  bool capture_invalidated = false;                       // a synchronising call came during one
  size_t records = 0;                                     // in the buffer being filled
  size_t records_per_buffer = 0;                          // 0: as many as fit
  std::condition_variable full_cv;
  bool worker = false;
};

// CUPTI's own thread: hands back buffers that are complete, outside any call of the program.
void complete_worker(Stub* s) {
  std::unique_lock lock(s->mu);
  for (;;) {
    s->full_cv.wait(lock, [&] { return !s->full.empty(); });
    std::vector<std::pair<uint8_t*, size_t>> done;
    done.swap(s->full);
    auto complete = s->complete;
    lock.unlock();
    for (auto [buffer, used] : done) complete(nullptr, 0, buffer, used, used);
    lock.lock();
  }
}

// Never destroyed: CUPTI's thread and late callbacks may still use it while the process exits.
Stub& stub() {
  static Stub* s = new Stub;
  return *s;
}

// CUPTI's clock in this stub: CLOCK_REALTIME shifted by an hour, so a profiler that forgets to
// convert puts the GPU an hour away from the CPU.
constexpr uint64_t kClockShift = 3600ull * 1000000000ull;

size_t record_size(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return sizeof(CUpti_ActivityMemcpy6);
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return sizeof(CUpti_ActivityMemset4);
    default:
      return 0;
  }
}

// Space for one record in the current buffer, asking sonde for one when needed.
void* reserve(Stub& s, size_t bytes) {
  if (s.buffer != nullptr && s.used + bytes > s.size) {
    s.full.emplace_back(s.buffer, s.used);
    s.buffer = nullptr;
  }
  if (s.buffer != nullptr && s.records_per_buffer > 0 && s.records == s.records_per_buffer) {
    s.full.emplace_back(s.buffer, s.used);
    s.buffer = nullptr;
    if (!s.worker) {
      s.worker = true;
      std::thread(complete_worker, &s).detach();
    }
    s.full_cv.notify_one();
  }
  if (s.buffer == nullptr) {
    size_t max_records = 0;
    if (s.request == nullptr) return nullptr;
    s.request(&s.buffer, &s.size, &max_records);
    s.used = 0;
    s.records = 0;
    if (const char* n = std::getenv("CUPTI_STUB_RECORDS_PER_BUFFER")) {
      s.records_per_buffer = std::strtoul(n, nullptr, 10);
    }
    if (s.buffer == nullptr || s.size < bytes) {
      s.buffer = nullptr;
      ++s.dropped;
      return nullptr;
    }
  }
  void* at = s.buffer + s.used;
  s.used += (bytes + 7) & ~size_t(7);
  ++s.records;
  std::memset(at, 0, bytes);
  return at;
}

// Every params struct of the profiler APIs starts with structSize; CUPTI refuses one too small
// for the fields it reads.
template <class Params>
bool sized(const Params* p, size_t size) {
  return p != nullptr && p->structSize != 0 && p->structSize >= size;
}

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

uint32_t stub_version() {
  const char* v = std::getenv("CUPTI_STUB_VERSION");
  return v != nullptr ? uint32_t(std::strtoul(v, nullptr, 10)) : CUPTI_API_VERSION;
}

STUB_EXPORT CUptiResult cuptiGetVersion(uint32_t* version) {
  *version = stub_version();
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  switch (result) {
    case CUPTI_SUCCESS:
      *str = "CUPTI_SUCCESS";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_NOT_INITIALIZED:
      *str = "CUPTI_ERROR_NOT_INITIALIZED";
      break;
    case CUPTI_ERROR_INVALID_PARAMETER:
      *str = "CUPTI_ERROR_INVALID_PARAMETER";
      break;
    case CUPTI_ERROR_INVALID_OPERATION:
      *str = "CUPTI_ERROR_INVALID_OPERATION";
      break;
    case CUPTI_ERROR_INVALID_METRIC_NAME:
      *str = "CUPTI_ERROR_INVALID_METRIC_NAME";
      break;
    case CUPTI_ERROR_NOT_SUPPORTED:
      *str = "CUPTI_ERROR_NOT_SUPPORTED";
      break;
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      *str = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES";
      break;
    case CUPTI_ERROR_OUT_OF_MEMORY:
      *str = "CUPTI_ERROR_OUT_OF_MEMORY";
      break;
    default:
      *str = "CUPTI_ERROR_UNKNOWN";
      break;
  }
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                          CUpti_CallbackFunc callback, void* userdata,
                                          CUpti_SubscriberParams* params) {
  Stub& s = stub();
  if (params == nullptr || params->structSize < CUpti_SubscriberParams_STRUCT_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  const char* holder = std::getenv("CUPTI_STUB_HELD_BY");
  // CUDA 13.2's field after oldSubscriberSize, read only from a caller whose struct has it.
  constexpr size_t kAllowAt = sizeof(CUpti_SubscriberParams);
  bool allow = stub_version() >= 130200 && params->structSize > kAllowAt &&
               reinterpret_cast<const uint8_t*>(params)[kAllowAt] != 0;
  if (holder != nullptr && allow && s.callback == nullptr) {
    if (params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0) {
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", holder);
    }
  } else if (holder != nullptr || s.callback != nullptr) {
    if (params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0) {
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s",
                    holder ? holder : "CUPTI for an earlier subscriber");
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  s.callback = callback;
  s.userdata = userdata;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&s);
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  stub().callback = nullptr;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle,
                                          CUpti_CallbackDomain domain) {
  if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  stub().domains[domain] = enable != 0;
  return CUPTI_SUCCESS;
}

// The names the test uses, as CUPTI spells them (with the runtime's version suffix).
STUB_EXPORT CUptiResult cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid,
                                             const char** name) {
  struct Name {
    CUpti_CallbackDomain domain;
    uint32_t cbid;
    const char* name;
  };
  static const Name kNames[] = {
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
       "cudaLaunchKernel_v7000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, "cudaMemcpy_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
       "cudaMemcpyAsync_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, "cudaMemset_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
       "cudaDeviceSynchronize_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
       "cudaGraphLaunch_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
       "cudaStreamBeginCapture_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
       "cudaStreamEndCapture_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
       "cudaLaunchCooperativeKernel_v9000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
       "cudaLaunchKernelExC_v11060"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, "cuLaunchKernel"},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2, "cuMemcpyHtoD_v2"},
  };
  for (const Name& n : kNames) {
    if (n.domain == domain && n.cbid == cbid) {
      *name = n.name;
      return CUPTI_SUCCESS;
    }
  }
  *name = nullptr;
  return CUPTI_ERROR_INVALID_PARAMETER;
}

STUB_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  // What CUPTI answers when the driver finds no device it can initialise.
  if (std::getenv("CUPTI_STUB_NO_DEVICE") != nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  if (record_size(kind) == 0) return CUPTI_ERROR_NOT_COMPATIBLE;
  stub().kinds[kind] = true;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  stub().kinds[kind] = false;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc complete) {
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  stub().request = request;
  stub().complete = complete;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  Stub& s = stub();
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0 && std::getenv("CUPTI_STUB_FLUSH_HANG")) {
    for (;;) pause();
  }
  std::vector<std::pair<uint8_t*, size_t>> done;
  {
    std::lock_guard lock(s.mu);
    if (s.buffer != nullptr && s.used > 0) {
      s.full.emplace_back(s.buffer, s.used);
      s.buffer = nullptr;
    }
    done.swap(s.full);
  }
  for (auto [buffer, used] : done) s.complete(nullptr, 0, buffer, used, used);
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid,
                                                   CUpti_Activity** record) {
  uint8_t* at = *record == nullptr ? buffer
                                   : reinterpret_cast<uint8_t*>(*record) +
                                         ((record_size((*record)->kind) + 7) & ~size_t(7));
  if (at >= buffer + valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(at);
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  std::lock_guard lock(stub().mu);
  *dropped = stub().dropped;
  stub().dropped = 0;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiGetTimestamp(uint64_t* timestamp) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  *timestamp = uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec) + kClockShift;
  return CUPTI_SUCCESS;
}

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

// ---- what the test program calls ----

// An API call entered (enter=1) or left (enter=0) on `context`; `slot` keeps CUPTI's per-call
// correlationData between the two, `symbol` is the kernel a launch names (or null). Returns 0
// when no subscriber wants the domain.
STUB_EXPORT int cupti_stub_api_ex(int domain, uint32_t cbid, uint32_t correlation,
                                  const void* params, int enter, uint64_t* slot, const char* symbol,
                                  uintptr_t context) {
  Stub& s = stub();
  // A capture runs from inside cudaStreamBeginCapture to inside cudaStreamEndCapture.
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    std::lock_guard lock(s.mu);
    if (enter && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000) ++s.capturing;
    if (!enter && cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000) --s.capturing;
  }
  if (s.callback == nullptr || !s.domains[domain]) return 0;
  CUpti_CallbackData data{};
  data.callbackSite = enter ? CUPTI_API_ENTER : CUPTI_API_EXIT;
  data.correlationId = correlation;
  data.functionParams = params;
  data.correlationData = slot;
  data.symbolName = symbol;
  data.context = reinterpret_cast<CUcontext>(context);
  cuptiGetCallbackName(CUpti_CallbackDomain(domain), cbid, &data.functionName);
  s.callback(s.userdata, CUpti_CallbackDomain(domain), cbid, &data);
  return 1;
}

// The context is being destroyed (cudaDeviceReset, cuCtxDestroy): the subscriber hears of it
// first, if it asked for resource callbacks; then, as with a real context, any range profiler
// still enabled on it is gone.
STUB_EXPORT void cupti_stub_context_destroy(uintptr_t context) {
  Stub& s = stub();
  auto ctx = reinterpret_cast<CUcontext>(context);
  if (s.callback != nullptr && s.domains[CUPTI_CB_DOMAIN_RESOURCE]) {
    CUpti_ResourceData data{};
    data.context = ctx;
    s.callback(s.userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING,
               &data);
  }
  std::lock_guard lock(s.mu);
  std::erase_if(s.profilers, [ctx](const auto& p) { return p->context == ctx; });
  // An assumption (docs/gpu.md): records CUPTI still holds for a destroyed context are not
  // delivered later. The stub runs every record on the one context, so it drops them all.
  s.used = 0;
  s.records = 0;
  for (auto [buffer, used] : s.full) std::free(buffer);
  s.full.clear();
}

// A context was created: the subscriber hears of it if it asked for resource callbacks.
STUB_EXPORT void cupti_stub_context_create(uintptr_t context) {
  Stub& s = stub();
  if (s.callback != nullptr && s.domains[CUPTI_CB_DOMAIN_RESOURCE]) {
    CUpti_ResourceData data{};
    data.context = reinterpret_cast<CUcontext>(context);
    s.callback(s.userdata, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED, &data);
  }
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

// 1 when a stream capture was invalidated by the range profiler's synchronisation.
STUB_EXPORT int cupti_stub_capture_invalidated(void) {
  std::lock_guard lock(stub().mu);
  return stub().capture_invalidated ? 1 : 0;
}

// The same on the stub's default context, naming no kernel.
STUB_EXPORT int cupti_stub_api(int domain, uint32_t cbid, uint32_t correlation, const void* params,
                               int enter, uint64_t* slot) {
  return cupti_stub_api_ex(domain, cbid, correlation, params, enter, slot, nullptr,
                           kDefaultContext);
}

STUB_EXPORT uint64_t cupti_stub_now(void) {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

STUB_EXPORT void cupti_stub_kernel(uint32_t correlation, const char* name, uint64_t start,
                                   uint64_t end, int grid_x, int block_x, int registers) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  if (!s.kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL]) return;
  auto* k = static_cast<CUpti_ActivityKernel10*>(reserve(s, sizeof(CUpti_ActivityKernel10)));
  if (k == nullptr) return;
  s.names.push_back(new std::string(name));
  k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k->correlationId = correlation;
  k->name = s.names.back()->c_str();
  k->start = start;
  k->end = end;
  k->deviceId = 0;
  k->streamId = 7;
  k->gridX = grid_x, k->gridY = 1, k->gridZ = 1;
  k->blockX = block_x, k->blockY = 1, k->blockZ = 1;
  k->registersPerThread = uint16_t(registers);
  k->staticSharedMemory = 1024;
  k->dynamicSharedMemory = 0;
}

STUB_EXPORT void cupti_stub_memcpy(uint32_t correlation, int copy_kind, uint64_t bytes,
                                   uint64_t start, uint64_t end) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  if (!s.kinds[CUPTI_ACTIVITY_KIND_MEMCPY]) return;
  auto* m = static_cast<CUpti_ActivityMemcpy6*>(reserve(s, sizeof(CUpti_ActivityMemcpy6)));
  if (m == nullptr) return;
  m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m->copyKind = uint8_t(copy_kind);
  m->correlationId = correlation;
  m->bytes = bytes;
  m->start = start;
  m->end = end;
  m->streamId = 7;
}

STUB_EXPORT void cupti_stub_memset(uint32_t correlation, uint64_t bytes, uint64_t start,
                                   uint64_t end) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  if (!s.kinds[CUPTI_ACTIVITY_KIND_MEMSET]) return;
  auto* m = static_cast<CUpti_ActivityMemset4*>(reserve(s, sizeof(CUpti_ActivityMemset4)));
  if (m == nullptr) return;
  m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m->correlationId = correlation;
  m->bytes = bytes;
  m->start = start;
  m->end = end;
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
    return 1;
  }
  return 0;
}
