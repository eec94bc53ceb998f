// Expands nvtx_routines.def: NVTX ranges become sonde regions of the same name, opened after
// the real push/start and closed before the real pop/end, so what runs inside (BLAS, CUDA,
// Python frames) appears beneath them. libsonde is not linked against libnvToolsExt; the real
// functions are looked up at their first call, which only a program that has NVTX makes.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cwchar>

#include "../intercept.hpp"
#include "core/per_thread.hpp"
#include "sonde/sonde.h"

namespace {

using RangeId = uint64_t;

// nvtxEventAttributes_t, version 2 (nvToolsExt.h; the layout is part of NVTX's ABI).
struct EventAttributes {
  uint16_t version;
  uint16_t size;
  uint32_t category;
  int32_t color_type;
  uint32_t color;
  int32_t payload_type;
  int32_t reserved0;
  uint64_t payload;
  int32_t message_type;  // 1 ASCII, 2 wide, 3 a registered string handle
  const void* message;
};

// A range's name is copied (the program may free its message once the push returns), short
// enough to keep per thread without allocating.
constexpr size_t kNameMax = 64;
constexpr int kDepthMax = 16;

struct Label {
  char name[kNameMax] = "";
  RangeId id = 0;
};

Label ascii(const char* s) {
  Label l;
  for (size_t i = 0; s != nullptr && s[i] != '\0' && i + 1 < kNameMax; ++i) l.name[i] = s[i];
  return l;
}

Label wide(const wchar_t* s) {
  Label l;
  for (size_t i = 0; s != nullptr && s[i] != L'\0' && i + 1 < kNameMax; ++i)
    l.name[i] = s[i] > 0 && s[i] < 0x80 ? char(s[i]) : '?';
  return l;
}

// Set once libsonde is NVTX 3's injection library (nvtx3_injection.cpp): string handles are
// then sonde's own copies, and libnvToolsExt (v2), which injects the same way, reaches sonde
// through the injection, so the v2 wrappers below only forward.
std::atomic<bool> g_injected{false};

Label message_of(const EventAttributes* a) {
  if (a == nullptr) return ascii("<nvtx>");
  if (a->message_type == 1) return ascii(static_cast<const char*>(a->message));
  if (a->message_type == 2) return wide(static_cast<const wchar_t*>(a->message));
  if (a->message_type == 3 && g_injected.load(std::memory_order_relaxed))
    return ascii(static_cast<const char*>(a->message));
  return ascii("<nvtx registered string>");
}

// The ranges this thread has open, innermost last. Beyond kDepthMax a push opens no region and
// its pop closes none.
struct Open {
  Label label;
  bool region;
};
thread_local sonde::PerThread<std::array<Open, kDepthMax>> t_open;
thread_local int t_depth = 0;

enum class Kind { kPush, kPop, kStart, kEnd };

void open_range(const Label& label, RangeId id) {
  int d = t_depth++;
  if (d >= kDepthMax) return;
  t_open.get()[d].label = label;
  t_open.get()[d].label.id = id;
  t_open.get()[d].region = true;
  sonde_region_begin(t_open.get()[d].label.name);  // the slot's copy: a name that outlives the call
}

void close_innermost() {
  if (t_depth == 0) return;  // a pop without a push: NVTX returns an error, sonde does nothing
  int d = --t_depth;
  if (d < kDepthMax && t_open.get()[d].region) sonde_region_end(t_open.get()[d].label.name);
}

// A start/end range closes where its id is open on this thread (ranges above it close with it,
// as regions do); one started on another thread is not a region here.
void close_id(RangeId id) {
  for (int d = std::min(t_depth, kDepthMax) - 1; d >= 0; --d) {
    if (t_open.get()[d].label.id != id || !t_open.get()[d].region) continue;
    sonde_region_end(t_open.get()[d].label.name);
    t_depth = d;
    return;
  }
}

template <Kind K, class Call>
auto range(Call call, const Label& label) {
  auto injected = [] { return g_injected.load(std::memory_order_relaxed); };
  if constexpr (K == Kind::kPush) {
    auto depth = call();  // the first call may load the injection (sonde itself)
    if (!injected()) open_range(label, 0);
    return depth;
  } else if constexpr (K == Kind::kStart) {
    RangeId id = call();
    if (!injected()) open_range(label, id);
    return id;
  } else if constexpr (K == Kind::kPop) {
    if (!injected()) close_innermost();
    return call();
  } else {
    if (!injected()) close_id(label.id);
    return call();
  }
}

// NVTX 3 injection: sonde is the implementation behind NVTX's functions. Push and pop answer
// what NVTX answers without a tool (NVTX_NO_PUSH_POP_TRACKING), so a host reads the same values
// under sonde; a start needs an id of its own, to end the right range.
constexpr int kNoPushPopTracking = -2;
std::atomic<RangeId> g_next_range{1};

int injected_push(const Label& label) {
  open_range(label, 0);
  return kNoPushPopTracking;
}
int injected_pop() {
  close_innermost();
  return kNoPushPopTracking;
}
RangeId injected_start(const Label& label) {
  RangeId id = g_next_range.fetch_add(1, std::memory_order_relaxed);
  open_range(label, id);
  return id;
}

#define SONDE_TABLE "nvtx/nvtx_routines.def"  // relative to wrapper_table.inc
#define SONDE_NVTX(NAME, ...) SONDE_TABLE_ROW(NAME)
#include "../wrapper_table.inc"
#undef SONDE_NVTX
#undef SONDE_TABLE

}  // namespace

#define SONDE_NVTX(NAME, RET, PARAMS, ARGS, KIND, LABEL)                            \
  extern "C" __attribute__((visibility("default"))) RET NAME PARAMS {               \
    auto real = reinterpret_cast<RET(*) PARAMS>(g_real[size_t(Entry::NAME)].get()); \
    return range<Kind::KIND>([&] { return real ARGS; }, LABEL);                     \
  }
#include "nvtx_routines.def"
#undef SONDE_NVTX

#include "nvtx3_injection.inc"
