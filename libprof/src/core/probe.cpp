// The hot path: what runs on every measured call. No lock, no allocation (except when a call
// path is new), no system call.
#include "sonde/probe.hpp"

#include <errno.h>

#include "core/clock.hpp"
#include "runtime/runtime.hpp"
#include "core/thread_local_state.hpp"

namespace sonde {

thread_local ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;
thread_local bool t_internal __attribute__((tls_model("initial-exec"))) = false;

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;

// The host sees errno as the real function leaves it: attaching allocates, and may touch it.
// Counters are read after the bookkeeping on entry and before it on exit, so they cover the
// callee as closely as the timestamps do.
__attribute__((noinline)) void start_counters(ThreadState* t, StackEntry& e) {
  if (!t->counter_backend->read(t->counter_handle, e.counter_start)) {
    for (uint32_t c = 0; c < t->counters; ++c) e.counter_start[c] = 0;
  }
  for (uint32_t c = 0; c < t->counters; ++c) e.counter_children[c] = 0;
}

__attribute__((noinline)) void stop_counters(ThreadState* t, StackEntry& e, Node& n,
                                             StackEntry& parent) {
  uint64_t now[kMaxCounters];
  if (!t->counter_backend->read(t->counter_handle, now)) return;
  for (uint32_t c = 0; c < t->counters; ++c) {
    uint64_t delta = now[c] > e.counter_start[c] ? now[c] - e.counter_start[c] : 0;
    bump(n.counter_incl[c], delta);
    bump(n.counter_excl[c], delta > e.counter_children[c] ? delta - e.counter_children[c] : 0);
    parent.counter_children[c] += delta;
  }
}

__attribute__((noinline)) ThreadState* attach_slow() {
  int saved = errno;
  Runtime* rt = Runtime::get();
  ThreadState* t = rt ? rt->attach_current_thread() : nullptr;
  errno = saved;
  return t;
}
}  // namespace

RoutineId register_routine(const RoutineSpec& spec) {
  Runtime* rt = Runtime::get();
  return rt ? rt->routines().intern(spec) : 0;
}

template <bool kNewCall>
inline ThreadState* enter(RoutineId routine, Nesting nesting) {
  ThreadState* t = t_state;
  if (__builtin_expect(t == nullptr, 0)) {
    t = attach_slow();
    if (t == nullptr) return nullptr;
  }
  if (t->suppress != 0 || routine == 0) return nullptr;
  uint32_t d = t->depth_.load(kRelaxed);
  if (__builtin_expect(d == t->max_depth_, 0)) {
    bump(t->depth_overflows, 1);
    return nullptr;
  }
  uint32_t parent = t->stack_[d].node.load(kRelaxed);
  uint32_t node = t->child_of(parent, routine);
  if (__builtin_expect(node == parent, 0)) return nullptr;  // node limit: charged to the caller
  if constexpr (kNewCall) {
    bump(t->nodes[node].calls, 1);
    bump(t->nodes[parent].subrs, 1);
  }
  StackEntry& e = t->stack_[d + 1];
  e.node.store(node, kRelaxed);
  e.nesting = nesting;
  e.child_ticks.store(0, kRelaxed);
  t->suppress += nesting == Nesting::kSuppress;
  if (__builtin_expect(t->counters != 0, 0)) start_counters(t, e);
  e.start.store(now_ticks(), kRelaxed);
  // The flusher reads depth first: the entry must be complete before it becomes visible.
  t->depth_.store(d + 1, std::memory_order_release);
  return t;
}

ThreadState* probe_enter(RoutineId routine, Nesting nesting) {
  return enter<true>(routine, nesting);
}

ThreadState* probe_resume(RoutineId routine, Nesting nesting) {
  return enter<false>(routine, nesting);
}

uint64_t probe_now() { return now_ticks(); }

void record_line(RoutineId routine, int line, uint64_t ticks) {
  if (ThreadState* t = t_state) t->record_line(routine, line, ticks);
}

void probe_exit(ThreadState* t, const CallCost* cost, const void* call_site) {
  uint64_t end = now_ticks();
  uint32_t d = t->depth_.load(kRelaxed);
  if (__builtin_expect(d == 0, 0)) return;  // unbalanced exit: nothing open to close
  StackEntry& e = t->stack_[d];
  uint64_t start = e.start.load(kRelaxed);
  uint64_t elapsed = end > start ? end - start : 0;
  uint32_t node = e.node.load(kRelaxed);
  Node& n = t->nodes[node];
  bump(n.incl_ticks, elapsed);
  uint64_t children = e.child_ticks.load(kRelaxed);
  bump(n.excl_ticks, elapsed > children ? elapsed - children : 0);
  if (cost != nullptr) {
    bump(n.flops, cost->flops);
    bump(n.bytes, cost->bytes);
    if (cost->shape.dtype != DType::kNone) {
      t->record_shape(node, call_site, cost->shape, elapsed, cost->flops, cost->bytes);
    }
  }
  if (t->trace) t->trace->push(TraceEvent{node, start, end});
  if (__builtin_expect(t->counters != 0, 0)) stop_counters(t, e, n, t->stack_[d - 1]);
  t->suppress -= e.nesting == Nesting::kSuppress;
  bump(t->stack_[d - 1].child_ticks, elapsed);
  t->depth_.store(d - 1, std::memory_order_release);
}

}  // namespace sonde
