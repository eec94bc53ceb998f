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
//                             allowMultipleSubscribers joins one already there (CUDA 13.2);
//                             from 130300, CUDA 13.3's multi-subscriber model: when the first
//                             subscriber allowed others, later cuptiSubscribe_v2 calls that ask
//                             the same join it, each subscriber gets its own activity records
//                             through the subscriber-scope (_v2) calls, and the process-wide
//                             activity calls are refused while a subscriber uses those
//                             (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED), and the other way
//                             round, as the CUPTI guide says of mixing them; records are as
//                             long as that release's (cupti_stub.hpp)
//
// CUDA graphs (graph and node ids, resource callbacks, records with graphNodeId) are in
// cupti_stub_graphs.cpp.
//
// Built twice: as libcupti.so.13 and, with CUPTI_STUB_MAJOR=12, as libcupti.so.12 (CUDA 12.6:
// version 24, Kernel9 and Memcpy5 records, no cuptiSubscribe_v2).
//   CUPTI_STUB_RECORDS_PER_BUFFER=n  a buffer is complete after n records and handed back from
//                             the stub's own thread, as CUPTI's worker thread does
//   CUPTI_STUB_FLUSH_HANG=1   a forced cuptiActivityFlushAll never returns (a known CUPTI hang)
//
// It also stands in for the CUDA 13 range profiler and profiler host APIs: one device (a
// "GH100"), a fixed list of metrics, and counter data that the test program supplies per kernel
// (cupti_stub_kernel_run). The config and counter data images are the stub's own formats, opaque
// to the profiler as CUPTI's are.
#include "cupti_stub.hpp"

using namespace cupti_stub;

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

// Both entry points; `params` nullptr: cuptiSubscribe, which allows no second subscriber and
// names no holder.
static CUptiResult subscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                             void* userdata, CUpti_SubscriberParams* params) {
  Stub& s = stub();
  const char* holder = std::getenv("CUPTI_STUB_HELD_BY");
  // CUDA 13.2's field after oldSubscriberSize, read only from a caller whose struct has it.
  constexpr size_t kAllowAt = sizeof(CUpti_SubscriberParams);
  bool allow = params != nullptr && stub_version() >= 130200 && params->structSize > kAllowAt &&
               reinterpret_cast<const uint8_t*>(params)[kAllowAt] != 0;
  bool named =
      params != nullptr && params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0;
  bool model_13_3 = stub_version() >= 130300;
  if (model_13_3 && allow && s.multi && s.callback != nullptr) {
    std::lock_guard lock(s.mu);
    auto& e = s.extras.emplace_back(std::make_unique<Extra>());
    e->callback = callback;
    e->userdata = userdata;
    if (named) std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "sonde");
    *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(e.get());
    return CUPTI_SUCCESS;
  }
  if (holder != nullptr && allow && s.callback == nullptr) {
    if (named) std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", holder);
  } else if (holder != nullptr || s.callback != nullptr) {
    if (named) {
      std::snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s",
                    holder ? holder : "CUPTI for an earlier subscriber");
    }
    return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  }
  s.callback = callback;
  s.userdata = userdata;
  s.multi = model_13_3 && allow;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&s);
  return CUPTI_SUCCESS;
}

#if CUPTI_STUB_MAJOR != 12  // cuptiSubscribe_v2 arrived in CUDA 13.0
STUB_EXPORT CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                          CUpti_CallbackFunc callback, void* userdata,
                                          CUpti_SubscriberParams* params) {
  if (params == nullptr || params->structSize < CUpti_SubscriberParams_STRUCT_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  return subscribe(subscriber, callback, userdata, params);
}
#endif

STUB_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                       CUpti_CallbackFunc callback, void* userdata) {
  return subscribe(subscriber, callback, userdata, nullptr);
}

// The subscriber's slot is free again: a later cuptiSubscribe succeeds. Its subscriber-scope
// activity ends with it; records still in its buffers are not delivered (flushing first is the
// client's to do, as the CUPTI guide's teardown says).
STUB_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  std::erase_if(s.activity2, [&](const auto& a) {
    if (a->owner != subscriber) return false;
    std::free(a->buffer);
    for (auto [buffer, used] : a->full) std::free(buffer);
    return true;
  });
  if (subscriber == reinterpret_cast<CUpti_SubscriberHandle>(&s)) {
    s.callback = nullptr;
    return CUPTI_SUCCESS;
  }
  std::erase_if(s.extras, [&](const auto& e) {
    return reinterpret_cast<CUpti_SubscriberHandle>(e.get()) == subscriber;
  });
  return CUPTI_SUCCESS;
}

// As CUPTI documents: every subscriber, callback domain, activity kind and the buffer callbacks
// are gone until a client sets them again. Records still in CUPTI's buffers are not delivered
// (flushing first is the client's to do), an assumption the stub makes the strict way.
STUB_EXPORT CUptiResult cuptiFinalize(void) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  s.callback = nullptr;
  s.userdata = nullptr;
  s.multi = false;
  s.extras.clear();
  for (auto& a : s.activity2) {
    std::free(a->buffer);
    for (auto [buffer, used] : a->full) std::free(buffer);
  }
  s.activity2.clear();
  std::fill(std::begin(s.domains), std::end(s.domains), false);
  std::fill(std::begin(s.kinds), std::end(s.kinds), false);
  s.request = nullptr;
  s.complete = nullptr;
  std::free(s.buffer);
  s.buffer = nullptr;
  s.used = 0;
  s.records = 0;
  for (auto [buffer, used] : s.full) std::free(buffer);
  s.full.clear();
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                          CUpti_CallbackDomain domain) {
  if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  for (auto& e : s.extras) {
    if (reinterpret_cast<CUpti_SubscriberHandle>(e.get()) == subscriber) {
      e->domains[domain] = enable != 0;
      return CUPTI_SUCCESS;
    }
  }
  s.domains[domain] = enable != 0;
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
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
       "cudaMemcpyPeer_v4000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaDeviceSynchronize_v3020,
       "cudaDeviceSynchronize_v3020"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
       "cudaGraphLaunch_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000,
       "cudaStreamBeginCapture_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
       "cudaStreamEndCapture_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000,
       "cudaGraphInstantiate_v12000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddKernelNode_v10000,
       "cudaGraphAddKernelNode_v10000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
       "cudaLaunchCooperativeKernel_v9000"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
       "cudaLaunchKernelExC_v11060"},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000,
       "__cudaLaunchKernel_v13000"},
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

// The process-wide activity calls, refused while a subscriber uses the subscriber-scope ones.
static bool mixing_with_v2() {
  std::lock_guard lock(stub().mu);
  return !stub().activity2.empty();
}

STUB_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  // What CUPTI answers when the driver finds no device it can initialise.
  if (std::getenv("CUPTI_STUB_NO_DEVICE") != nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  if (record_size(kind) == 0) return CUPTI_ERROR_NOT_COMPATIBLE;
  if (mixing_with_v2()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  stub().kinds[kind] = true;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  if (mixing_with_v2()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  stub().kinds[kind] = false;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc complete) {
  if (request == nullptr || complete == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  if (mixing_with_v2()) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  stub().request = request;
  stub().complete = complete;
  return CUPTI_SUCCESS;
}

#if CUPTI_STUB_MAJOR != 12  // the subscriber-scope calls arrived in CUDA 13.2
static Activity2* activity_of(Stub& s, CUpti_SubscriberHandle subscriber, bool make) {
  for (auto& a : s.activity2) {
    if (a->owner == subscriber) return a.get();
  }
  if (!make) return nullptr;
  auto& a = s.activity2.emplace_back(std::make_unique<Activity2>());
  a->owner = subscriber;
  return a.get();
}

STUB_EXPORT CUptiResult cuptiActivityRegisterCallbacks_v2(CUpti_SubscriberHandle subscriber,
                                                          RequestV2 request, CompleteV2 complete) {
  if (subscriber == nullptr || request == nullptr || complete == nullptr) {
    return CUPTI_ERROR_INVALID_PARAMETER;
  }
  if (stub_version() < 130200) return CUPTI_ERROR_NOT_SUPPORTED;
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  if (s.request != nullptr) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  Activity2* a = activity_of(s, subscriber, true);
  a->request = request;
  a->complete = complete;
  return CUPTI_SUCCESS;
}

// `config` nullptr: the predefined records, as cuptiActivityEnable gives them.
STUB_EXPORT CUptiResult cuptiActivityEnable_v2(CUpti_SubscriberHandle subscriber,
                                               CUpti_ActivityKind kind, void* config) {
  if (std::getenv("CUPTI_STUB_NO_DEVICE") != nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  if (config != nullptr) return CUPTI_ERROR_NOT_SUPPORTED;  // user-defined records: not stubbed
  if (record_size(kind) == 0) return CUPTI_ERROR_NOT_COMPATIBLE;
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  if (s.request != nullptr) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  Activity2* a = activity_of(s, subscriber, false);
  if (a == nullptr) return CUPTI_ERROR_INVALID_OPERATION;  // no buffer callbacks registered
  a->kinds[kind] = true;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityDisable_v2(CUpti_SubscriberHandle subscriber,
                                                CUpti_ActivityKind kind, void*) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  Activity2* a = activity_of(s, subscriber, false);
  if (a == nullptr) return CUPTI_ERROR_INVALID_OPERATION;
  a->kinds[kind] = false;
  return CUPTI_SUCCESS;
}

STUB_EXPORT CUptiResult cuptiActivityGetNextRecord_v2(CUpti_SubscriberHandle subscriber,
                                                      uint8_t* buffer, size_t valid,
                                                      CUpti_Activity** record) {
  if (subscriber == nullptr) return CUPTI_ERROR_INVALID_PARAMETER;
  return cuptiActivityGetNextRecord(buffer, valid, record);
}
#endif

STUB_EXPORT CUptiResult cuptiActivityFlushAll(uint32_t flag) {
  Stub& s = stub();
  if ((flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) != 0 && std::getenv("CUPTI_STUB_FLUSH_HANG")) {
    for (;;) pause();
  }
  std::vector<std::pair<uint8_t*, size_t>> done;
  std::vector<std::tuple<CompleteV2, uint8_t*, size_t>> done2;
  {
    std::lock_guard lock(s.mu);
    if (s.buffer != nullptr && s.used > 0) {
      s.full.emplace_back(s.buffer, s.used);
      s.buffer = nullptr;
    }
    done.swap(s.full);
    for (auto& a : s.activity2) {
      if (a->buffer != nullptr && a->used > 0) {
        a->full.emplace_back(a->buffer, a->used);
        a->buffer = nullptr;
      }
      for (auto [buffer, used] : a->full) done2.emplace_back(a->complete, buffer, used);
      a->full.clear();
    }
  }
  for (auto [buffer, used] : done) s.complete(nullptr, 0, buffer, used, used);
  for (auto [complete, buffer, used] : done2) complete(buffer, used, used, nullptr);
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
  std::vector<std::pair<CUpti_CallbackFunc, void*>> others;
  {
    std::lock_guard lock(s.mu);
    for (auto& e : s.extras) {
      if (e->callback != nullptr && e->domains[domain])
        others.emplace_back(e->callback, e->userdata);
    }
  }
  bool first = s.callback != nullptr && s.domains[domain];
  if (!first && others.empty()) return 0;
  CUpti_CallbackData data{};
  data.callbackSite = enter ? CUPTI_API_ENTER : CUPTI_API_EXIT;
  data.correlationId = correlation;
  data.functionParams = params;
  data.correlationData = slot;
  data.symbolName = symbol;
  data.context = reinterpret_cast<CUcontext>(context);
  cuptiGetCallbackName(CUpti_CallbackDomain(domain), cbid, &data.functionName);
  if (first) s.callback(s.userdata, CUpti_CallbackDomain(domain), cbid, &data);
  // Each later subscriber has a correlationData slot of its own in CUPTI; the stub's callers
  // keep one, which only the first subscriber uses.
  uint64_t own = 0;
  data.correlationData = &own;
  for (auto [callback, userdata] : others)
    callback(userdata, CUpti_CallbackDomain(domain), cbid, &data);
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
  kernel_record(correlation, name, start, end, grid_x, block_x, registers, 0, 0);
}

void cupti_stub::kernel_record(uint32_t correlation, const char* name, uint64_t start, uint64_t end,
                               int grid_x, int block_x, int registers, uint64_t graph_node,
                               uint32_t graph) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  auto replayed = std::find(s.replayed.begin(), s.replayed.end(), name);
  bool untimed = replayed != s.replayed.end();
  if (!s.kinds[CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL] && s.activity2.empty()) return;
  if (untimed) s.replayed.erase(replayed);
  s.names.push_back(new std::string(name));
  const char* kept = s.names.back()->c_str();
  emit(s, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, record_size(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
       [&](void* at) {
         auto* k = static_cast<CUpti_ActivityKernel10*>(at);
         k->kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
         k->correlationId = correlation;
         k->name = kept;
         k->start = untimed ? 0 : start;
         k->end = untimed ? 0 : end;
         k->deviceId = 0;
         k->streamId = 7;
         k->gridX = grid_x, k->gridY = 1, k->gridZ = 1;
         k->blockX = block_x, k->blockY = 1, k->blockZ = 1;
         k->registersPerThread = uint16_t(registers);
         k->staticSharedMemory = 1024;
         k->dynamicSharedMemory = 0;
         k->graphNodeId = graph_node;
         k->graphId = graph;
       });
}

STUB_EXPORT void cupti_stub_memcpy(uint32_t correlation, int copy_kind, uint64_t bytes,
                                   uint64_t start, uint64_t end) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  emit(s, CUPTI_ACTIVITY_KIND_MEMCPY, record_size(CUPTI_ACTIVITY_KIND_MEMCPY), [&](void* at) {
    auto* m = static_cast<CUpti_ActivityMemcpy6*>(at);
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    m->copyKind = uint8_t(copy_kind);
    m->correlationId = correlation;
    m->bytes = bytes;
    m->start = start;
    m->end = end;
    m->streamId = 7;
  });
}

STUB_EXPORT void cupti_stub_memset(uint32_t correlation, uint64_t bytes, uint64_t start,
                                   uint64_t end) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  emit(s, CUPTI_ACTIVITY_KIND_MEMSET, record_size(CUPTI_ACTIVITY_KIND_MEMSET), [&](void* at) {
    auto* m = static_cast<CUpti_ActivityMemset4*>(at);
    m->kind = CUPTI_ACTIVITY_KIND_MEMSET;
    m->correlationId = correlation;
    m->bytes = bytes;
    m->start = start;
    m->end = end;
  });
}

// A copy between two GPUs: CUPTI reports it as its own kind (CUpti_ActivityMemcpyPtoP4).
STUB_EXPORT void cupti_stub_peer_copy(uint32_t correlation, uint64_t bytes, uint64_t start,
                                      uint64_t end, uint32_t src_device, uint32_t dst_device) {
  Stub& s = stub();
  std::lock_guard lock(s.mu);
  emit(s, CUPTI_ACTIVITY_KIND_MEMCPY2, sizeof(CUpti_ActivityMemcpyPtoP4), [&](void* at) {
    auto* m = static_cast<CUpti_ActivityMemcpyPtoP4*>(at);
    m->kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
    m->copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
    m->bytes = bytes;
    m->start = start;
    m->end = end;
    m->deviceId = src_device;
    m->srcDeviceId = src_device;
    m->dstDeviceId = dst_device;
    m->streamId = 7;
    m->correlationId = correlation;
  });
}
