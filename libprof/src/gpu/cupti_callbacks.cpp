// CUPTI's runtime- and driver-API callbacks: each call is measured as a routine of kind 'cuda'
// on the calling thread, named as the preloaded wrappers name it (copies carry their direction:
// 'cudaMemcpy HtoD'), and launches, copies and memsets remember the call path they came from.
#include <array>
#include <cstddef>
#include <cstring>

#include "core/per_thread.hpp"
#include "core/thread_local_state.hpp"
#include "gpu/cupti_backend.hpp"  // cupti.h brings the runtime's parameter structs
#include "sonde/routine_kinds.hpp"

namespace sonde {

namespace {

// The API calls this thread entered through sonde's callbacks, innermost last. An exit is
// measured only when it matches the innermost entry: CUPTI may subscribe in the middle of a call
// (the runtime's first call opens the driver), and then delivers an exit without its entry.
struct OpenCall {
  uint32_t correlation;
  bool runtime;
  ThreadState* thread;  // nullptr: entered but not measured
  bool held;            // made while the collection window was closed
  bool clones;          // copies graph nodes (cudaGraphInstantiate, cudaGraphClone)
};
constexpr uint32_t kMaxOpenCalls = 32;  // API calls do not nest deeper (a callback's own calls)
thread_local PerThread<std::array<OpenCall, kMaxOpenCalls>> t_open;
thread_local uint32_t t_open_count = 0;
// Runtime calls among them: the driver calls a runtime call makes are its own business (their
// work is reported under the runtime call's correlation id; measuring them would count twice).
thread_local uint32_t t_runtime_open = 0;

constexpr const char* kDirections[] = {"HtoH", "HtoD", "DtoH", "DtoD", "Default"};
constexpr int kNoDirection = 5;
constexpr size_t kMaxOrigins = size_t(1) << 20;  // launches in flight whose records are pending

// Where the copy direction and the byte count sit in the runtime's copy and memset parameters.
struct CopyParams {
  CUpti_CallbackId cbid;
  int kind_offset, count_offset;
};
#define SONDE_COPY(fn)                                               \
  {                                                                  \
    CUPTI_RUNTIME_TRACE_CBID_##fn, int(offsetof(fn##_params, kind)), \
        int(offsetof(fn##_params, count))                            \
  }
#define SONDE_COPY_2D(fn) \
  { CUPTI_RUNTIME_TRACE_CBID_##fn, int(offsetof(fn##_params, kind)), -1 }
#define SONDE_SET(fn) \
  { CUPTI_RUNTIME_TRACE_CBID_##fn, -1, int(offsetof(fn##_params, count)) }
constexpr CopyParams kCopies[] = {
    SONDE_COPY(cudaMemcpy_v3020),
    SONDE_COPY(cudaMemcpyAsync_v3020),
    SONDE_COPY(cudaMemcpy_ptds_v7000),
    SONDE_COPY(cudaMemcpyAsync_ptsz_v7000),
    SONDE_COPY(cudaMemcpyToSymbol_v3020),
    SONDE_COPY(cudaMemcpyFromSymbol_v3020),
    SONDE_COPY(cudaMemcpyToSymbolAsync_v3020),
    SONDE_COPY(cudaMemcpyFromSymbolAsync_v3020),
    SONDE_COPY_2D(cudaMemcpy2D_v3020),
    SONDE_COPY_2D(cudaMemcpy2DAsync_v3020),
    SONDE_COPY_2D(cudaMemcpy2D_ptds_v7000),
    SONDE_COPY_2D(cudaMemcpy2DAsync_ptsz_v7000),
    SONDE_SET(cudaMemset_v3020),
    SONDE_SET(cudaMemsetAsync_v3020),
    SONDE_SET(cudaMemset_ptds_v7000),
    SONDE_SET(cudaMemsetAsync_ptsz_v7000),
};
#undef SONDE_COPY
#undef SONDE_COPY_2D
#undef SONDE_SET

// CUPTI's names may carry the API version and the per-thread-stream variant
// (cudaMemcpy_v3020, cudaMemcpyAsync_ptsz): the user called cudaMemcpy / cudaMemcpyAsync.
std::string plain_name(const char* raw) {
  std::string name = raw;
  auto strip = [&](std::string_view suffix) {
    if (name.size() > suffix.size() && name.ends_with(suffix))
      name.resize(name.size() - suffix.size());
  };
  size_t v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size() && name.size() - v >= 6 &&
      name.find_first_not_of("0123456789", v + 2) == std::string::npos) {
    name.resize(v);  // _v3020, _v11060: runtime versions; the driver's _v2 are real symbols
  }
  strip("_ptds");
  strip("_ptsz");
  // nvcc 13's launch entry (__cudaLaunchKernel) is the program's kernel<<<...>>>: named as the
  // preloaded wrapper names it.
  if (name.starts_with("__cuda")) name.erase(0, 2);
  return name;
}

bool makes_gpu_work(const std::string& name) {
  return name.find("Launch") != std::string::npos || name.find("Memcpy") != std::string::npos ||
         name.find("Memset") != std::string::npos;
}

// routines.role of an API call CUPTI names, as the wrappers' table states it for those it
// intercepts (wrappers/cuda): CUPTI reports every API call, most of which no table lists.
const char* api_role(const std::string& name) {
  auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (has("HtoD") || has("DtoH")) return roles::kCopy;
  if (has("Synchronize")) return roles::kSync;
  if (has("Launch")) return roles::kLaunch;
  return roles::kOther;
}

}  // namespace

CuptiBackend::ApiInfo& CuptiBackend::api_info(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  ApiInfo& info = runtime ? runtime_info_[cbid] : driver_info_[cbid];
  if (info.ready.load(std::memory_order_acquire)) return info;
  std::lock_guard lock(info_mu_);
  if (info.ready.load(std::memory_order_relaxed)) return info;
  const char* raw = nullptr;
  if (lib_.cuptiGetCallbackName(domain, cbid, &raw) == CUPTI_SUCCESS && raw != nullptr) {
    info.name = plain_name(raw);
  } else {
    info.name = std::string(runtime ? "cudart#" : "cu#") + std::to_string(cbid);
  }
  info.activity = makes_gpu_work(info.name);
  auto has = [&](const char* part) { return info.name.find(part) != std::string::npos; };
  info.kernel = has("LaunchKernel") || has("LaunchCooperativeKernel");
  info.cooperative = has("Cooperative");
  info.graph = has("GraphLaunch");
  if (has("LaunchKernelEx")) info.launch_config = runtime ? 1 : 2;
  info.capture = has("BeginCapture") ? 1 : has("EndCapture") ? -1 : 0;
  info.clones = has("GraphInstantiate") || has("GraphClone");
  if (runtime) {
    for (const CopyParams& c : kCopies) {
      if (c.cbid != cbid) continue;
      info.kind_offset = c.kind_offset;
      info.count_offset = c.count_offset;
    }
  }
  info.ready.store(true, std::memory_order_release);
  return info;
}

RoutineId CuptiBackend::routine_of(ApiInfo& info, CUpti_CallbackDomain domain, int direction) {
  RoutineId id = info.routine[direction].load(std::memory_order_relaxed);
  if (id != 0) return id;
  std::string name =
      direction == kNoDirection ? info.name : info.name + " " + kDirections[direction];
  // The preloaded wrappers' names (wrappers/cuda): either path gives the same routines.
  const char* library = domain == CUPTI_CB_DOMAIN_RUNTIME_API ? "cudart" : "cuda";
  id = register_routine({name.c_str(), kinds::kCuda, library, "", 0, DType::kNone, api_role(name)});
  info.routine[direction].store(id, std::memory_order_relaxed);
  return id;
}

void CuptiBackend::remember_origin(uint32_t correlation, bool awaiting_metrics, bool graph,
                                   bool before_window) {
  // The innermost open frame: the API call itself when it is measured, else whatever frame
  // (a cuBLAS call, a Python function) the launch happened in.
  ThreadState* t = t_state;
  Origin o;
  if (t != nullptr) {
    o.thread = t;
    o.node = t->stack_[t->depth()].node.load(std::memory_order_relaxed);
  }
  std::lock_guard lock(origins_mu_);
  if (origins_.size() >= kMaxOrigins) {
    origins_full_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  o.generation = generation_;
  o.awaiting_metrics = awaiting_metrics;
  o.graph = graph;
  o.before_window = before_window;
  origins_[correlation] = o;
}

void CuptiBackend::on_api(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                          const CUpti_CallbackData* data) {
  if (forked_.load(std::memory_order_relaxed) || t_internal || data == nullptr) return;
  bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  if (!runtime && t_runtime_open > 0) return;
  if ((runtime ? runtime_info_.size() : driver_info_.size()) <= cbid) {
    // An id the loaded CUPTI has and sonde's table not: each call counted once, for the note
    // at exit.
    if (data->callbackSite == CUPTI_API_ENTER &&
        beyond_table_.fetch_add(1, std::memory_order_relaxed) == 0) {
      first_beyond_.store(runtime ? cbid : cbid | 0x80000000u, std::memory_order_relaxed);
    }
    return;
  }
  ApiInfo& info = api_info(domain, cbid);
  if (data->callbackSite == CUPTI_API_ENTER) {
    if (t_open_count == kMaxOpenCalls) return;
    int direction = kNoDirection;
    if (info.kind_offset >= 0 && data->functionParams != nullptr) {
      int kind = 0;
      std::memcpy(&kind, static_cast<const char*>(data->functionParams) + info.kind_offset,
                  sizeof kind);
      direction = kind >= 0 && kind < kNoDirection ? kind : kNoDirection - 1;  // else Default
    }
    // A launch before the collection window leaves no record and costs no metrics pass.
    bool held = window_.closed();
    // Outside the call's own time: starting the range profiler is sonde's work.
    bool metrics = false;
    if (info.kernel && !held && activity_.load(std::memory_order_acquire) && metrics_) {
      int skip = metrics_skip(info, data);
      if (skip >= 0) {
        metrics_->skipped(KernelMetrics::Skip(skip));
      } else {
        metrics = metrics_->launch_enter(data->context, data->correlationId);
      }
    }
    ThreadState* t = probe_enter(routine_of(info, domain, direction), Nesting::kSuppress);
    t_open.get()[t_open_count++] = OpenCall{data->correlationId, runtime, t, held, info.clones};
    t_runtime_open += runtime;
    if (info.activity && activity_.load(std::memory_order_relaxed) &&
        !ceded_.load(std::memory_order_relaxed)) {
      remember_origin(data->correlationId, metrics, info.graph, held);
    }
    return;
  }
  if (t_open_count == 0) return;
  OpenCall& top = t_open.get()[t_open_count - 1];
  if (top.correlation != data->correlationId || top.runtime != runtime) return;
  --t_open_count;
  t_runtime_open -= runtime;
  bool held = top.held;
  if (info.capture != 0) track_capture(info, data);
  if (top.thread != nullptr) {
    CallCost cost;
    if (info.count_offset >= 0 && data->functionParams != nullptr) {
      size_t count = 0;
      std::memcpy(&count, static_cast<const char*>(data->functionParams) + info.count_offset,
                  sizeof count);
      cost.bytes = count;
    }
    probe_exit(top.thread, &cost, nullptr);
  }
  if (info.kernel && !held && activity_.load(std::memory_order_acquire) && metrics_) {
    std::vector<std::pair<uint32_t, MetricValues>> measured;
    metrics_->launch_exit(data->context, data->correlationId, measured);
    attach_metrics(data->correlationId, measured);
  }
}

bool CuptiBackend::cloning_now() {
  for (uint32_t i = 0; i < t_open_count; ++i)
    if (t_open.get()[i].clones) return true;
  return false;
}

bool CuptiBackend::current_origin(NodeOrigin& o) const {
  // As a launch's (remember_origin): the API call that creates the node, else the innermost
  // frame. Nothing before the collection window: those calls are not in the profile.
  ThreadState* t = t_state;
  if (t == nullptr || window_.closed()) return false;
  o.thread = t;
  o.node = t->stack_[t->depth()].node.load(std::memory_order_relaxed);
  return true;
}

int CuptiBackend::metrics_skip(const ApiInfo& info, const CUpti_CallbackData* data) const {
  if (captures_.load(std::memory_order_acquire) > 0) return int(KernelMetrics::Skip::kCapture);
  if (info.cooperative) return int(KernelMetrics::Skip::kWaits);
  // NCCL's kernels (ncclKernel_*, ncclDevKernel_* in NCCL 2.19+) spin until their peers on
  // other GPUs arrive; a replayed pass would wait for peers that never come.
  const char* symbol = data->symbolName;
  if (symbol != nullptr &&
      (std::strstr(symbol, "ncclKernel") != nullptr || std::strstr(symbol, "ncclDevKernel"))) {
    return int(KernelMetrics::Skip::kWaits);
  }
  // The extensible launches carry cooperation as an attribute (cudaLaunchAttributeCooperative,
  // CU_LAUNCH_ATTRIBUTE_COOPERATIVE: both 2, a nonzero int value).
  if (info.launch_config != 0 && data->functionParams != nullptr) {
    const void* config = *static_cast<const void* const*>(data->functionParams);
    bool cooperative = false;
    if (info.launch_config == 1 && config != nullptr) {
      const auto* c = static_cast<const cudaLaunchConfig_t*>(config);
      for (unsigned i = 0; c->attrs != nullptr && i < c->numAttrs; ++i) {
        cooperative |=
            c->attrs[i].id == cudaLaunchAttributeCooperative && c->attrs[i].val.cooperative;
      }
    } else if (config != nullptr) {
      const auto* c = static_cast<const CUlaunchConfig*>(config);
      for (unsigned i = 0; c->attrs != nullptr && i < c->numAttrs; ++i) {
        cooperative |=
            c->attrs[i].id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && c->attrs[i].value.cooperative;
      }
    }
    if (cooperative) return int(KernelMetrics::Skip::kWaits);
  }
  return -1;
}

void CuptiBackend::track_capture(const ApiInfo& info, const CUpti_CallbackData* data) {
  // cudaError_t and CUresult both say success with 0; a begin that failed opened nothing.
  int rc = data->functionReturnValue != nullptr
               ? *static_cast<const int*>(data->functionReturnValue)
               : 0;
  if (info.capture > 0) {
    if (rc == 0) captures_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  // An end closes the capture even when it reports the capture invalidated.
  int open = captures_.load(std::memory_order_acquire);
  while (open > 0 && !captures_.compare_exchange_weak(open, open - 1)) {
  }
}

void CuptiBackend::attach_metrics(uint32_t exiting,
                                  std::vector<std::pair<uint32_t, MetricValues>>& measured) {
  std::lock_guard lock(origins_mu_);
  for (auto& [correlation, values] : measured) {
    auto it = origins_.find(correlation);
    if (it == origins_.end()) continue;
    it->second.metrics = std::move(values);
    it->second.awaiting_metrics = false;
  }
  // The exiting launch has whatever it will get (nothing, when its range was lost).
  if (auto it = origins_.find(exiting); it != origins_.end()) it->second.awaiting_metrics = false;
}

}  // namespace sonde
