#include "torch_comm.hpp"

#include <array>
#include <atomic>

namespace sonde::torch_ops {
namespace {

constexpr uint64_t kRing = 256;  // events posted and not yet taken; a caller takes at each op

struct Posted {
  std::atomic<uint64_t> seq{0};  // i + 1 once event i is written
  uint32_t key = 0;
  uint64_t bytes = 0;
};

std::array<Posted, kRing> g_ring;
std::atomic<uint64_t> g_posted{0}, g_taken{0};

}  // namespace

uint32_t operation_key(const char* name) {
  const char* p = name;
  for (const char* c = name; *c != '\0'; ++c)
    if (*c == ':') p = c + 1;  // after the last ':' ("c10d::", "gloo:")
  uint32_t h = 2166136261u;
  const char* end = p;
  while (*end != '\0') ++end;
  if (end > p && end[-1] == '_') --end;  // allreduce_: the in-place form
  for (; p < end; ++p)
    if (*p != '_') h = (h ^ uint8_t(*p)) * 16777619u;
  return h;
}

void post_transfer(uint32_t key, uint64_t bytes) {
  uint64_t i = g_posted.load(std::memory_order_relaxed);
  do {
    if (i - g_taken.load(std::memory_order_acquire) >= kRing) return;  // full: dropped
  } while (!g_posted.compare_exchange_weak(i, i + 1, std::memory_order_acq_rel));
  Posted& p = g_ring[i % kRing];
  p.key = key;
  p.bytes = bytes;
  p.seq.store(i + 1, std::memory_order_release);
}

bool take_transfer(bool (*wanted)(uint32_t key, const void* ctx), const void* ctx, uint32_t& key,
                   uint64_t& bytes) {
  constexpr uint64_t kStale = 32;
  uint64_t i = g_taken.load(std::memory_order_acquire);
  for (;;) {
    const Posted& p = g_ring[i % kRing];
    if (p.seq.load(std::memory_order_acquire) != i + 1) return false;  // none, or not written yet
    key = p.key;
    bytes = p.bytes;
    bool stale = g_posted.load(std::memory_order_acquire) - i > kStale;
    if (!wanted(key, ctx) && !stale) return false;  // another thread's: left for it
    if (g_taken.compare_exchange_weak(i, i + 1, std::memory_order_acq_rel)) return true;
  }
}

}  // namespace sonde::torch_ops
