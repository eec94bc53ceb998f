// CUPTI's activity API is one per process: whoever registers buffer callbacks last receives
// every record, and any client may disable a kind for all. A later client (Kineto when
// torch.profiler starts inside a run under sonde) would silently take sonde's GPU records, so
// libsonde interposes the two calls that do it, forwards them unchanged, and says
// what they did to sonde's profile. And before CUDA 13.2 CUPTI takes one subscriber: Kineto's
// cuptiSubscribe failed while sonde held it (torch.profiler then recorded no GPU activity, seen
// on an H200), so sonde gives its subscription up to a later subscriber. When that client
// unsubscribes or finalizes CUPTI (torch.profiler stopping), sonde takes CUPTI back, so that a
// profiler window at steps 10-15 costs sonde those steps and not the rest of the run. sonde's
// own calls go through CuptiLibrary's pointers and never come here.
#include <dlfcn.h>
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <thread>

#include "core/thread_local_state.hpp"
#include "gpu/cupti_backend.hpp"

#define SONDE_CUPTI_EXPORT extern "C" __attribute__((visibility("default")))

namespace sonde {

namespace {

std::atomic<CuptiBackend*> g_guarded{nullptr};

// The library that made the call, for the note (libkineto, libtorch_cuda.so, a tool).
std::string caller_name(const void* address) {
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "another CUPTI client";
  const char* base = std::strrchr(info.dli_fname, '/');
  return base != nullptr ? base + 1 : info.dli_fname;
}

// The real CUPTI function. RTLD_NEXT finds it only when libcupti is in the global scope; a
// client opened with RTLD_LOCAL (PyTorch's libtorch_cuda, whose Kineto links libcupti) has it
// in its own scope only, as has sonde (its dlopen is RTLD_LOCAL): on an H200 RTLD_NEXT found no
// cuptiSubscribe there. The caller's CUPTI is loaded, so it is found by its soname too (CUDA
// 13's or 12's). Looked up until found: a call before any libcupti is loaded must not fix a
// null for good.
template <class Fn>
class Real {
 public:
  explicit Real(const char* name) : name_(name) {}
  Fn get() {
    if (Fn f = fn_.load(std::memory_order_acquire)) return f;
    void* f = dlsym(RTLD_NEXT, name_);
    for (const char* soname : {"libcupti.so.13", "libcupti.so.12"}) {
      if (f != nullptr) break;
      if (void* cupti = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD)) {
        f = dlsym(cupti, name_);
        dlclose(cupti);  // NOLOAD took a reference; the library stays loaded
      }
    }
    if (f != nullptr) fn_.store(reinterpret_cast<Fn>(f), std::memory_order_release);
    return reinterpret_cast<Fn>(f);
  }

 private:
  const char* name_;
  std::atomic<Fn> fn_{nullptr};
};

// A refused subscription while sonde holds the one subscriber: sonde steps aside and the
// caller's subscription is made again. Any other answer is the caller's, unchanged. `caller`:
// the interposer's return address, for the note.
// `process_wide`: the caller used cuptiSubscribe, as clients of the process-wide activity calls
// (Kineto) do.
template <class Fn, class... Args>
CUptiResult subscribe(Real<Fn>& real_fn, const void* caller, bool process_wide, Args... args) {
  Fn real = real_fn.get();
  if (real == nullptr) return CUPTI_ERROR_NOT_INITIALIZED;
  CUptiResult rc = real(args...);
  CuptiBackend* b = g_guarded.load(std::memory_order_acquire);
  if (rc == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && b != nullptr &&
      b->other_client_subscribes(caller_name(caller), process_wide)) {
    rc = real(args...);
  }
  return rc;
}

const char* kind_name(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return "kernel";
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return "memcpy";
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return "memset";
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return "peer-to-peer memcpy";
    default:
      return nullptr;  // a kind sonde does not use
  }
}

}  // namespace

// Who registered activity buffers before sonde started, if anyone (set once, read at start).
std::atomic<bool> g_registered_before{false};
char g_registered_by[128];

void guard_cupti(CuptiBackend* backend) { g_guarded.store(backend, std::memory_order_release); }

void note_registered_before(const std::string& who) {
  if (g_registered_before.exchange(true)) return;
  std::snprintf(g_registered_by, sizeof g_registered_by, "%s", who.c_str());
}

bool registered_before(std::string& who) {
  if (!g_registered_before.load()) return false;
  who = g_registered_by;
  return true;
}

void CuptiBackend::other_client_registers(const std::string& who) {
  if (per_subscriber_.load()) {
    // Its process-wide buffers would be refused beside sonde's own: sonde steps aside, and
    // uses the process-wide calls itself when it takes CUPTI back.
    process_wide_client_.store(true);
    give_up(
        fmt::format("{} registered CUPTI activity buffers for the whole process while the "
                    "program ran (as torch.profiler's Kineto does), which CUPTI refuses "
                    "beside a subscriber's own records: sonde gave its subscription up so "
                    "that the other client works. GPU kernels, copies and memsets from then "
                    "on are not in this profile; CUDA calls are measured by the preloaded "
                    "wrappers where they can be",
                    who));
    return;
  }
  if (!activity_.load() || ceded_.exchange(true)) return;
  // sonde's records so far still come to sonde: after the registration CUPTI would hand its
  // buffers, and the records in them, to the other client's callbacks.
  lib_.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  int64_t none = 0;
  ceded_at_.compare_exchange_strong(none, realtime_ns());
  note_("gpu-other-client",
        fmt::format("{} registered its own CUPTI activity buffers while the program ran (as "
                    "torch.profiler's Kineto does): GPU kernels, copies and memsets from then on "
                    "went to it and are not in this profile; CUDA calls still are",
                    who));
}

bool CuptiBackend::give_up(const std::string& note) {
  if (forked_.load() || !traced_.exchange(false)) return false;
  // Its records so far are sonde's; the other client will register buffers of its own.
  if (activity_.load() && !ceded_.exchange(true)) {
    lib_.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
  lib_.cuptiUnsubscribe(subscriber_);
  gave_up_.store(true);
  int64_t none = 0;
  ceded_at_.compare_exchange_strong(none, realtime_ns());
  if (!note.empty()) note_("gpu-other-client", note);
  return true;
}

bool CuptiBackend::other_client_subscribes(const std::string& who, bool process_wide) {
  if (process_wide && per_subscriber_.load()) process_wide_client_.store(true);
  return give_up(fmt::format(
      "{} subscribed to CUPTI while the program ran (as torch.profiler's Kineto does), and "
      "{}: sonde gave its subscription up so that the other client works. GPU kernels, copies "
      "and memsets from then on are not in this profile; CUDA calls are measured by the "
      "preloaded wrappers where they can be",
      who,
      per_subscriber_.load() ? "CUPTI refused it beside sonde's subscription"
                             : "this CUPTI allows one subscriber"));
}

void CuptiBackend::other_client_finalizes() {
  if (forked_.load() || closing_.load()) return;
  if (per_subscriber_.load()) {
    // cuptiFinalize returns early while another subscriber is there, and detaches the last
    // one: sonde leaves first, so that either way it subscribes again cleanly afterwards.
    give_up("");
    return;
  }
  if (activity_.load() && !ceded_.exchange(true)) {
    lib_.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
}

bool CuptiBackend::subscribe_again() {
  char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
  CUptiResult rc = subscribe(holder, CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN);
  for (CUpti_CallbackDomain d :
       {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RESOURCE}) {
    if (rc != CUPTI_SUCCESS) break;
    if (d == CUPTI_CB_DOMAIN_RESOURCE && !activity_.load()) break;
    rc = lib_.cuptiEnableDomain(1, subscriber_, d);
  }
  if (rc != CUPTI_SUCCESS) {
    note_("gpu-other-client",
          fmt::format("sonde could not subscribe to CUPTI again after the other client left "
                      "({}): CUDA calls and GPU activity after that are not recorded through it",
                      lib_.describe(rc)));
    traced_.store(false, std::memory_order_release);  // after cuptiFinalize it had none
    return false;
  }
  return true;
}

void CuptiBackend::other_client_leaves(const std::string& who, bool finalized) {
  if (forked_.load() || closing_.load()) return;
  if (!finalized && !gave_up_.load() && !ceded_.load()) return;  // it had taken nothing
  // Not on the caller's thread: CUPTI's samples call cuptiFinalize from inside a callback (at
  // an API call's exit), and a subscription made there could deadlock or be refused. This
  // thread's calls wait for that callback to return, as CUPTI serialises them.
  try {
    std::thread([this, who, finalized] {
      t_internal = true;  // nothing of this thread is the host's
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, nullptr);
      std::lock_guard lock(taking_back_mu_);
      take_back(who, finalized);
    }).detach();
  } catch (const std::exception& e) {  // no thread to be had (RLIMIT_NPROC): never the host's error
    note_("gpu-other-client",
          fmt::format("{} left CUPTI, but sonde could not start the thread that takes it back "
                      "({}): GPU activity after that is not in this profile",
                      who, e.what()));
  }
}

void CuptiBackend::take_back(const std::string& who, bool finalized) {
  if (forked_.load() || closing_.load()) return;
  bool resubscribe = gave_up_.exchange(false) || finalized;
  bool reregister = activity_.load() && (ceded_.load() || finalized);
  int64_t from = ceded_at_.exchange(0);
  if (resubscribe && !subscribe_again()) return;
  // From here CUPTI hands sonde's buffers its records again, and the flusher takes them.
  if (reregister && enable_activity_kinds()) ceded_.store(false);
  // Last: a program that sees CUPTI tracing again finds sonde's records enabled too.
  if (resubscribe) traced_.store(true, std::memory_order_release);
  if (from != 0 && (resubscribe || reregister)) {
    int64_t to = realtime_ns();
    note_("gpu-other-client",
          fmt::format("{} {} CUPTI and sonde took it back: GPU kernels, copies and memsets "
                      "between {} and {} ns (CLOCK_REALTIME, as the timeline's; {:.3f} s) went "
                      "to the other client and are not in this profile; those before and after "
                      "are",
                      who, finalized ? "finalized" : "unsubscribed from", from, to,
                      double(to - from) / 1e9));
  }
}

void CuptiBackend::other_client_disables(const std::string& who, const char* kind) {
  // A subscriber's own kinds are not the process-wide ones another client turns off.
  if (!activity_.load() || ceded_.load() || per_subscriber_.load()) return;
  note_("gpu-other-client",
        fmt::format("{} disabled CUPTI's {} records, which sonde had enabled: {}s after that are "
                    "missing from this profile",
                    who, kind, kind));
}

}  // namespace sonde

using sonde::g_guarded;

SONDE_CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(
    CUpti_BuffersCallbackRequestFunc request, CUpti_BuffersCallbackCompleteFunc complete) {
  static sonde::Real<decltype(&cuptiActivityRegisterCallbacks)> real_fn(
      "cuptiActivityRegisterCallbacks");
  auto real = real_fn.get();
  std::string who = sonde::caller_name(__builtin_return_address(0));
  sonde::CuptiBackend* before = g_guarded.load(std::memory_order_acquire);
  if (before != nullptr) before->other_client_registers(who);
  CUptiResult rc = real != nullptr ? real(request, complete) : CUPTI_ERROR_NOT_INITIALIZED;
  if (before == nullptr && rc == CUPTI_SUCCESS) {
    // CUPTI loads the driver inside its first call, and sonde starts there: its buffers were
    // registered first and the caller's replaced them. Or sonde has not started yet, and must
    // not take the caller's buffers when it does.
    if (sonde::CuptiBackend* inside = g_guarded.load(std::memory_order_acquire)) {
      inside->other_client_registers(who);
    } else {
      sonde::note_registered_before(who);
    }
  }
  return rc;
}

SONDE_CUPTI_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                                       CUpti_CallbackFunc callback,
                                                       void* userdata) {
  static sonde::Real<decltype(&cuptiSubscribe)> real("cuptiSubscribe");
  return sonde::subscribe(real, __builtin_return_address(0), true, subscriber, callback, userdata);
}

SONDE_CUPTI_EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* subscriber,
                                                          CUpti_CallbackFunc callback,
                                                          void* userdata,
                                                          CUpti_SubscriberParams* params) {
  static sonde::Real<decltype(&cuptiSubscribe_v2)> real("cuptiSubscribe_v2");
  return sonde::subscribe(real, __builtin_return_address(0), false, subscriber, callback, userdata,
                          params);
}

SONDE_CUPTI_EXPORT CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  static sonde::Real<decltype(&cuptiActivityDisable)> real_fn("cuptiActivityDisable");
  auto real = real_fn.get();
  if (sonde::CuptiBackend* b = g_guarded.load(std::memory_order_acquire)) {
    if (const char* name = sonde::kind_name(kind)) {
      b->other_client_disables(sonde::caller_name(__builtin_return_address(0)), name);
    }
  }
  return real != nullptr ? real(kind) : CUPTI_ERROR_NOT_INITIALIZED;
}

// The other client leaving: CUPTI is taken back once its call has returned (it flushed its own
// records before, as Kineto does on stopping), never from inside a CUPTI callback.
SONDE_CUPTI_EXPORT CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  static sonde::Real<decltype(&cuptiUnsubscribe)> real_fn("cuptiUnsubscribe");
  auto real = real_fn.get();
  CUptiResult rc = real != nullptr ? real(subscriber) : CUPTI_ERROR_NOT_INITIALIZED;
  if (sonde::CuptiBackend* b = g_guarded.load(std::memory_order_acquire);
      b != nullptr && rc == CUPTI_SUCCESS) {
    b->other_client_leaves(sonde::caller_name(__builtin_return_address(0)), false);
  }
  return rc;
}

// cuptiFinalize detaches every subscriber and activity kind, sonde's too: its records so far
// are taken before, and it subscribes and enables them again after.
SONDE_CUPTI_EXPORT CUptiResult CUPTIAPI cuptiFinalize() {
  static sonde::Real<decltype(&cuptiFinalize)> real_fn("cuptiFinalize");
  auto real = real_fn.get();
  sonde::CuptiBackend* b = g_guarded.load(std::memory_order_acquire);
  if (b != nullptr) b->other_client_finalizes();
  CUptiResult rc = real != nullptr ? real() : CUPTI_ERROR_NOT_INITIALIZED;
  if (b != nullptr && rc == CUPTI_SUCCESS) {
    b->other_client_leaves(sonde::caller_name(__builtin_return_address(0)), true);
  }
  return rc;
}
