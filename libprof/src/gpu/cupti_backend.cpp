// Starting CUPTI: subscribing next to other CUPTI clients where CUDA allows it, the callback
// domains, and the activity kinds. Every refusal is said once, in CUPTI's words, and leaves
// the CPU side of the profile as it would be without CUDA.
#include "gpu/cupti_backend.hpp"

#include <fmt/format.h>

#include <atomic>

namespace sonde {

namespace {

// CUPTI's buffer callbacks carry no user data: the backend that started CUPTI (one a process;
// never destroyed, as the runtime that holds it).
std::atomic<CuptiBackend*> g_started{nullptr};

CuptiBackend* backend() { return g_started.load(std::memory_order_acquire); }

void CUPTIAPI api_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* data) {
  if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
    if (data == nullptr) return;
    CUcontext context = static_cast<const CUpti_ResourceData*>(data)->context;
    auto* b = static_cast<CuptiBackend*>(userdata);
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_CREATED) b->on_context_created(context);
    if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) b->on_context_destroyed(context);
    if (cbid >= CUPTI_CBID_RESOURCE_GRAPH_CREATED && cbid <= CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) {
      // These callbacks' resourceDescriptor is a CUpti_GraphData (CUPTI's cuda_graphs_trace
      // sample reads it so).
      const void* graph = static_cast<const CUpti_ResourceData*>(data)->resourceDescriptor;
      if (graph != nullptr) b->on_graph(cbid, static_cast<const CUpti_GraphData*>(graph));
    }
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  static_cast<CuptiBackend*>(userdata)->on_api(domain, cbid,
                                               static_cast<const CUpti_CallbackData*>(data));
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (CuptiBackend* b = backend()) {
    b->on_buffer_request(buffer, size, max_records);
  } else {
    *buffer = nullptr;
    *size = 0;
  }
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size,
                               size_t valid) {
  if (CuptiBackend* b = backend()) {
    b->on_buffer_complete(context, stream, buffer, size, valid);
  }
}

// The subscriber-scope callbacks (cupti_v2_abi.hpp): the same buffers, without the context and
// stream, which sonde reads from the records.
void CUPTIAPI buffer_requested_v2(uint8_t** buffer, size_t* size, size_t* max_records,
                                  CuptiBufferRequestInfo*) {
  buffer_requested(buffer, size, max_records);
}

void CUPTIAPI buffer_completed_v2(uint8_t* buffer, size_t size, size_t valid,
                                  CuptiBufferCompleteInfo*) {
  buffer_completed(nullptr, 0, buffer, size, valid);
}

// CUDA 13.2 added allowMultipleSubscribers after oldSubscriberSize; older headers lack it, and
// a CUPTI of the same age reads only structSize bytes, so the field is sent only to one that
// knows it.
constexpr uint32_t kMultiSubscriberVersion = 130200;
struct SubscriberParams {
  CUpti_SubscriberParams base;
#if CUPTI_API_VERSION < 130200
  uint8_t allowMultipleSubscribers;
#endif
};

}  // namespace

std::unique_ptr<GpuBackend> make_cupti_backend(const std::string& library,
                                               const std::vector<std::string>& metrics,
                                               const NoteSink& note, CollectionWindow& window) {
  CuptiLibrary lib;
  std::string error;
  if (!lib.load(library, error)) {
    note("gpu", fmt::format("{}: CUDA calls and GPU activity are not recorded through CUPTI "
                            "(set SONDE_CUPTI_LIBRARY to its path)",
                            error));
    return nullptr;
  }
  uint32_t version = 0;
  if (CUptiResult rc = lib.cuptiGetVersion(&version); rc != CUPTI_SUCCESS) {
    note("gpu", fmt::format("{} did not say its version ({}): CUDA calls and GPU activity are "
                            "not recorded through CUPTI",
                            lib.path, lib.describe(rc)));
    return nullptr;
  }
  return std::make_unique<CuptiBackend>(std::move(lib), expand_gpu_metrics(metrics), note, version,
                                        window);
}

CuptiBackend::CuptiBackend(CuptiLibrary lib, std::vector<std::string> metrics, NoteSink note,
                           uint32_t version, CollectionWindow& window)
    : window_(window),
      lib_(std::move(lib)),
      metric_names_(std::move(metrics)),
      note_(std::move(note)),
      version_(version),
      layout_(record_layout(version)),
      // An unknown version's callbacks are still measured, up to the ids sonde was built with.
      runtime_info_(layout_ ? layout_->runtime_cbids : uint32_t{CUPTI_RUNTIME_TRACE_CBID_SIZE}),
      driver_info_(layout_ ? layout_->driver_cbids : uint32_t{CUPTI_DRIVER_TRACE_CBID_SIZE}) {}

bool CuptiBackend::start() {
  // Reachable before subscribing: CUPTI may ask for a buffer as soon as activity is enabled.
  g_started.store(this, std::memory_order_release);
  // Before subscribing: the callbacks read metrics_ from the moment they are enabled.
  start_metrics();
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUptiResult rc = subscribe(holder, CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN);
  if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    std::string who = holder[0] != 0 ? holder : "another CUPTI client";
    note_("gpu", fmt::format("CUPTI is held by {}, which allows no second subscriber: CUDA calls "
                             "are measured by the preloaded wrappers where they can be, and GPU "
                             "activity is not recorded",
                             who));
    return false;
  }
  if (rc != CUPTI_SUCCESS) {
    note_("gpu", fmt::format("CUPTI refused a subscriber ({}); GPU activity is not recorded",
                             lib_.describe(rc)));
    return false;
  }
  for (CUpti_CallbackDomain d : {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API}) {
    rc = lib_.cuptiEnableDomain(1, subscriber_, d);
    if (rc != CUPTI_SUCCESS) {
      note_("gpu", fmt::format("CUPTI callbacks could not be enabled ({}); GPU activity is not "
                               "recorded",
                               lib_.describe(rc)));
      lib_.cuptiUnsubscribe(subscriber_);
      return false;
    }
  }
  traced_.store(true, std::memory_order_release);
  guard_cupti(this);  // a later subscriber is given CUPTI (cupti_guard.cpp)
  if (holder[0] != 0) {
    note_("gpu-shared", fmt::format("CUPTI is shared with {}", holder));
  }

  // The activity API has one set of buffer callbacks per process: registering sonde's would
  // take every record from a client that registered first.
  if (std::string who; registered_before(who)) {
    note_("gpu-other-client",
          fmt::format("{} had registered its own CUPTI activity buffers before sonde started: "
                      "sonde leaves them to it; CUDA calls are measured, kernels and copies are "
                      "not",
                      who));
    return true;
  }
  if (layout_ == nullptr) {
    // Its records may be laid out otherwise than any release sonde knows: read by a guess,
    // they would be wrong numbers, or a wild name pointer.
    note_("gpu", fmt::format("CUPTI {} ({}) is a version whose activity records sonde cannot "
                             "read: CUDA calls are measured, kernels and copies are not",
                             version_, lib_.path));
    return true;
  }
  if (!enable_activity_kinds()) return true;
  // Contexts that end take their records and range profilers with them: the CUDA runtime
  // destroys its contexts in its own exit handlers, which run before sonde's (see
  // Runtime::start_gpu), so each context's records are taken when it is being destroyed.
  if (lib_.cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE) != CUPTI_SUCCESS) {
    note_("gpu",
          "CUPTI's resource callbacks could not be enabled: GPU records of a context "
          "destroyed before exit may be lost");
    if (metrics_) {
      metrics_.reset();  // no callback has used it: launches reach it only once activity is on
      note_("gpu-metrics",
            "GPU metrics are not recorded: CUPTI's resource callbacks could not be "
            "enabled");
    }
  }
  activity_.store(true, std::memory_order_release);
  if (metrics_) {
    // Kernel replay runs each kernel once per pass and serialises launches: a metrics run
    // measures what kernels do, not how long the program takes.
    note_("gpu-metrics-timing",
          "SONDE_GPU_METRICS: kernels are replayed and serialised to count their metrics; GPU "
          "and CPU times of this run are inflated (time a run without metrics)");
  }
  return true;
}

CUptiResult CuptiBackend::subscribe(char* holder, uint32_t holder_size) {
  SubscriberParams params{};
  params.base.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.base.subscriberName = "sonde";
  params.base.oldSubscriberName = holder;
  params.base.oldSubscriberSize = holder_size;
  // From 13.3 allowing others means tracing through the subscriber-scope calls, which CUPTI
  // refuses beside the process-wide ones: sonde asks for it only where it will use them, and
  // not once a client of the process-wide calls (Kineto) has shown itself, or registered
  // buffers before sonde started.
  std::string earlier;
  bool per_subscriber = layout_ != nullptr && version_ >= kPerSubscriberActivityVersion &&
                        lib_.cuptiActivityRegisterCallbacks_v2 != nullptr &&
                        lib_.cuptiSubscribe_v2 != nullptr && !process_wide_client_.load() &&
                        !registered_before(earlier);
  bool allow = per_subscriber ||
               (version_ >= kMultiSubscriberVersion && version_ < kPerSubscriberActivityVersion);
  if (allow) {
#if CUPTI_API_VERSION < 130200
    params.allowMultipleSubscribers = 1;
    params.base.structSize = offsetof(SubscriberParams, allowMultipleSubscribers) + 1;
#else
    params.base.allowMultipleSubscribers = 1;
    params.base.structSize = sizeof(CUpti_SubscriberParams);
#endif
  }
  // CUPTI 12 has only cuptiSubscribe, which names no holder.
  CUptiResult rc = lib_.cuptiSubscribe_v2 != nullptr
                       ? lib_.cuptiSubscribe_v2(&subscriber_, api_callback, this, &params.base)
                       : lib_.cuptiSubscribe(&subscriber_, api_callback, this);
  per_subscriber_.store(rc == CUPTI_SUCCESS && per_subscriber, std::memory_order_release);
  return rc;
}

bool CuptiBackend::enable_activity_kinds() {
  bool own = per_subscriber_.load();
  auto enable = [&](CUpti_ActivityKind kind) {
    return own ? lib_.cuptiActivityEnable_v2(subscriber_, kind, nullptr)
               : lib_.cuptiActivityEnable(kind);
  };
  CUptiResult rc = own ? lib_.cuptiActivityRegisterCallbacks_v2(subscriber_, buffer_requested_v2,
                                                                buffer_completed_v2)
                       : lib_.cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET}) {
    if (rc != CUPTI_SUCCESS) break;
    rc = enable(kind);
  }
  if (rc != CUPTI_SUCCESS) {
    // No driver, no device, or activity tracing held by another client: the API calls are
    // still measured, the GPU side is not.
    note_("gpu", fmt::format("CUPTI activity records are unavailable ({}): CUDA calls are "
                             "measured, kernels and copies are not",
                             lib_.describe(rc)));
    return false;
  }
  // Copies between two GPUs come as their own kind; without them the rest still stands.
  rc = enable(CUPTI_ACTIVITY_KIND_MEMCPY2);
  if (rc != CUPTI_SUCCESS) {
    note_("gpu", fmt::format("CUPTI peer-to-peer copy records are unavailable ({}): copies "
                             "between GPUs are not in the profile",
                             lib_.describe(rc)));
  }
  return true;
}

void CuptiBackend::start_metrics() {
  if (metric_names_.empty()) return;
  std::string error;
  if (!lib_.load_profiler(error)) {
    note_("gpu-metrics", fmt::format("GPU metrics are not recorded: {}", error));
    return;
  }
  metrics_ = std::make_unique<KernelMetrics>(lib_, metric_names_, note_);
}

void CuptiBackend::fork_child() {
  // The parent's locks may have been held at fork: the child never takes them again.
  forked_.store(true);
  traced_.store(false);
  guard_cupti(nullptr);
}

}  // namespace sonde
