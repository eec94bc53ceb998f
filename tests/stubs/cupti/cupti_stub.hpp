// Shared by the two halves of the stub libcupti (cupti_stub.cpp: callbacks and activity records;
// cupti_stub_profiler.cpp: the range profiler and its host API): the one stub state, its
// buffers and the range profilers it keeps per context.
#pragma once

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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
#include <tuple>
#include <vector>

#define STUB_EXPORT extern "C" __attribute__((visibility("default")))

namespace cupti_stub {

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

// A subscriber after the first, where CUDA 13.3 lets several trace at once: its own callback
// and domains (the first subscriber's are the Stub's own fields, as before 13.3).
struct Extra {
  CUpti_CallbackFunc callback = nullptr;
  void* userdata = nullptr;
  bool domains[CUPTI_CB_DOMAIN_SIZE] = {};
};

// One subscriber's activity through the subscriber-scope calls (cuptiActivityRegisterCallbacks_v2
// and cuptiActivityEnable_v2): its own buffer callbacks, kinds and buffers, as the CUPTI guide
// describes them ("Multiple Subscribers").
using RequestV2 = void(CUPTIAPI*)(uint8_t**, size_t*, size_t*, void*);
using CompleteV2 = void(CUPTIAPI*)(uint8_t*, size_t, size_t, void*);
struct Activity2 {
  CUpti_SubscriberHandle owner = nullptr;
  RequestV2 request = nullptr;
  CompleteV2 complete = nullptr;
  bool kinds[64] = {};
  uint8_t* buffer = nullptr;
  size_t size = 0, used = 0;
  std::vector<std::pair<uint8_t*, size_t>> full;
};

struct Stub {
  std::mutex mu;
  // CUDA 13.3's model (CUPTI_STUB_VERSION >= 130300): the first subscriber asked to allow
  // others (allowMultipleSubscribers), so later cuptiSubscribe_v2 calls that ask the same join.
  bool multi = false;
  std::vector<std::unique_ptr<Extra>> extras;         // under mu
  std::vector<std::unique_ptr<Activity2>> activity2;  // under mu
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
  // Kernels a started range profiler recorded (kernel replay): their activity records come
  // without timestamps (start = end = 0), as CUPTI 13.0 delivered them on an H200.
  std::vector<std::string> replayed;  // under mu
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
inline void complete_worker(Stub* s) {
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
inline Stub& stub() {
  static Stub* s = new Stub;
  return *s;
}

// CUPTI's clock in this stub: CLOCK_REALTIME shifted by an hour, so a profiler that forgets to
// convert puts the GPU an hour away from the CPU.
constexpr uint64_t kClockShift = 3600ull * 1000000000ull;

// What cuptiGetVersion answers: CUPTI_STUB_VERSION, else the release the stub was built as
// (CUDA 12.6's 24 for the libcupti.so.12 build, the headers' own for libcupti.so.13).
#ifndef CUPTI_STUB_DEFAULT_VERSION
#define CUPTI_STUB_DEFAULT_VERSION CUPTI_API_VERSION
#endif
inline uint32_t stub_version() {
  const char* v = std::getenv("CUPTI_STUB_VERSION");
  return v != nullptr ? uint32_t(std::strtoul(v, nullptr, 10)) : CUPTI_STUB_DEFAULT_VERSION;
}

// The length of each record in the release the stub presents, as that release's header has it
// (CUpti_ActivityKernel9 208 bytes before 13.0, Kernel10 216; Memcpy5 88 before 12.8, Memcpy6
// 96; from 13.4 Kernel13, Memcpy7 and Memset5 append 24, 16 and 16 bytes). The fields the stub
// fills lie in the prefix all of them share, so it writes them through the 13.0 structs.
inline size_t record_size(CUpti_ActivityKind kind) {
  uint32_t v = stub_version();
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      return v < 130000 ? 208 : v < 130400 ? 216 : 240;
    case CUPTI_ACTIVITY_KIND_MEMCPY:
      return v < 26 ? 88 : v < 130400 ? 96 : 112;
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return v < 130400 ? 88 : 104;
    case CUPTI_ACTIVITY_KIND_MEMCPY2:
      return 96;
    default:
      return 0;
  }
}

// Space for one record in the current buffer, asking sonde for one when needed.
inline void* reserve(Stub& s, size_t bytes) {
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

// Space for one record in a subscriber's own buffer (subscriber-scope activity).
inline void* reserve2(Activity2& a, size_t bytes) {
  if (a.buffer != nullptr && a.used + bytes > a.size) {
    a.full.emplace_back(a.buffer, a.used);
    a.buffer = nullptr;
  }
  if (a.buffer == nullptr) {
    size_t max_records = 0;
    a.request(&a.buffer, &a.size, &max_records, nullptr);
    a.used = 0;
    if (a.buffer == nullptr || a.size < bytes) {
      a.buffer = nullptr;
      return nullptr;
    }
  }
  void* at = a.buffer + a.used;
  a.used += (bytes + 7) & ~size_t(7);
  std::memset(at, 0, bytes);
  return at;
}

// One record of `kind`, written by `fill`, into every client that enabled the kind: the
// process-wide buffers (cuptiActivityEnable) and each subscriber's own (cuptiActivityEnable_v2).
// Under s.mu.
template <class Fill>
void emit(Stub& s, CUpti_ActivityKind kind, size_t bytes, Fill fill) {
  if (s.kinds[kind]) {
    if (void* at = reserve(s, bytes)) fill(at);
  }
  for (auto& a : s.activity2) {
    if (!a->kinds[kind]) continue;
    if (void* at = reserve2(*a, bytes)) fill(at);
  }
}

// A kernel's activity record in the buffer (cupti_stub.cpp); `graph_node` and `graph`: the
// graph node that ran it and its graph's id, 0 for a kernel launched directly.
void kernel_record(uint32_t correlation, const char* name, uint64_t start, uint64_t end, int grid_x,
                   int block_x, int registers, uint64_t graph_node, uint32_t graph);

// Every params struct of the profiler APIs starts with structSize; CUPTI refuses one too small
// for the fields it reads.
template <class Params>
bool sized(const Params* p, size_t size) {
  return p != nullptr && p->structSize != 0 && p->structSize >= size;
}

}  // namespace cupti_stub
