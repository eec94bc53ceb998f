#include "torch_comm.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <thread>

namespace sonde::torch_ops {
namespace {

constexpr uint64_t kRing = 256;  // events posted and not yet passed; a caller takes at each op
// Newer events behind an untaken one before a thread that does not want it passes it over: by
// then its call is long gone, or never was; half the ring, so that orphans never fill it.
constexpr uint64_t kStale = kRing / 2;

// Slot state for event i: 2(i + 1) once it is written and free, 2(i + 1) + 1 once taken (by a
// call, or passed over); anything else: another lap's event, or not written yet.
struct Posted {
  std::atomic<uint64_t> state{0};
  uint32_t key = 0;
  uint64_t bytes = 0;
  const char* name = nullptr;
};

std::array<Posted, kRing> g_ring;
// g_taken: every event below it is taken; the ring's slots below it may be written again.
std::atomic<uint64_t> g_posted{0}, g_taken{0};

constexpr size_t kNames = 16;
struct Unmatched {
  std::atomic<const char*> name{nullptr};
  std::atomic<uint64_t> count{0};
};
std::array<Unmatched, kNames> g_unmatched;

uint64_t free_state(uint64_t i) { return 2 * (i + 1); }

void count_unmatched(const char* name) {
  if (name == nullptr) return;
  for (Unmatched& u : g_unmatched) {
    const char* seen = u.name.load(std::memory_order_acquire);
    if (seen == nullptr && u.name.compare_exchange_strong(seen, name)) seen = name;
    if (seen == name) {  // interned: one pointer per name
      u.count.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

// Claims event i as no call's when it is still free.
void pass_over(uint64_t i) {
  Posted& p = g_ring[i % kRing];
  uint64_t s = free_state(i);
  const char* name = p.name;
  if (p.state.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) count_unmatched(name);
}

// Moves g_taken over the taken events at its head, passing over a stale one the caller does not
// want (nullptr `wanted`: none).
uint64_t advance(bool (*wanted)(uint32_t, uint64_t, const void*), const void* ctx) {
  uint64_t head = g_taken.load(std::memory_order_acquire);
  for (;;) {
    uint64_t posted = g_posted.load(std::memory_order_acquire);
    if (head >= posted) return head;
    const Posted& p = g_ring[head % kRing];
    uint64_t s = p.state.load(std::memory_order_acquire);
    if (s == free_state(head) && posted - head > kStale && wanted != nullptr &&
        !wanted(p.key, head, ctx)) {
      pass_over(head);
      continue;
    }
    if (s != free_state(head) + 1) return head;  // free and recent, or not written yet
    // On failure `head` is what another thread advanced it to.
    if (g_taken.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel)) ++head;
  }
}

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

uint64_t claim_transfer() {
  uint64_t i = g_posted.load(std::memory_order_relaxed);
  do {
    if (i - g_taken.load(std::memory_order_acquire) >= kRing) return kFull;
  } while (!g_posted.compare_exchange_weak(i, i + 1, std::memory_order_acq_rel));
  return i;
}

void publish_transfer(uint64_t i, uint32_t key, uint64_t bytes, const char* name) {
  Posted& p = g_ring[i % kRing];
  p.key = key;
  p.bytes = bytes;
  p.name = name;
  p.state.store(free_state(i), std::memory_order_release);
}

void post_transfer(uint32_t key, uint64_t bytes, const char* name) {
  if (uint64_t i = claim_transfer(); i != kFull) publish_transfer(i, key, bytes, name);
}

void await_posting() {
  uint64_t posted = g_posted.load(std::memory_order_acquire);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  for (uint64_t i = g_taken.load(std::memory_order_acquire); i < posted; ++i) {
    // Written (free or taken), or already a later lap's: slot i is no longer being written.
    auto written = [&] {
      return g_ring[i % kRing].state.load(std::memory_order_acquire) >= free_state(i);
    };
    for (int spins = 0; !written(); ++spins) {
      if (std::chrono::steady_clock::now() > deadline) return;
      if (spins < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

uint64_t transfers_posted() { return g_posted.load(std::memory_order_acquire); }

bool take_transfer(bool (*wanted)(uint32_t key, uint64_t index, const void* ctx), const void* ctx,
                   uint32_t& key, uint64_t& bytes, uint64_t& index) {
  uint64_t posted = g_posted.load(std::memory_order_acquire);
  for (uint64_t i = advance(wanted, ctx); i < posted; ++i) {
    Posted& p = g_ring[i % kRing];
    uint64_t s = p.state.load(std::memory_order_acquire);
    if (s == free_state(i) + 1) continue;  // taken
    if (s != free_state(i)) return false;  // not written yet: nothing newer is either, in order
    uint32_t k = p.key;
    uint64_t b = p.bytes;
    if (!wanted(k, i, ctx)) continue;  // another thread's, or no call's
    if (p.state.compare_exchange_strong(s, s + 1, std::memory_order_acq_rel)) {
      key = k;
      bytes = b;
      index = i;
      advance(nullptr, nullptr);
      return true;
    }
  }
  return false;
}

void pass_over_untaken() {
  uint64_t posted = g_posted.load(std::memory_order_acquire);
  for (uint64_t i = g_taken.load(std::memory_order_acquire); i < posted; ++i) pass_over(i);
  advance(nullptr, nullptr);
}

void unmatched_transfers(void (*visit)(const char* name, uint64_t count, void* ctx), void* ctx) {
  for (Unmatched& u : g_unmatched) {
    const char* name = u.name.load(std::memory_order_acquire);
    if (name == nullptr) break;
    if (uint64_t n = u.count.load(std::memory_order_relaxed)) visit(name, n, ctx);
  }
}

}  // namespace sonde::torch_ops
