// The steps of one measured frame, with the time as a parameter: probe.cpp calls them with the
// clock, and the unit tests call the same code with chosen ticks, so every expected time is
// exact and no copy of the hot path exists. No lock, no allocation (except when a call path is
// new), no system call other than reading software counters.
#pragma once

#include <errno.h>

#include "core/thread_state.hpp"

namespace sonde {

// Counters are read after the bookkeeping on entry and before it on exit, so they cover the
// callee as closely as the timestamps do.
__attribute__((noinline)) inline void start_counters(ThreadState* t, StackEntry& e) {
  if (!t->counter_backend->read(t->counter_handle, e.counter_start)) {
    for (uint32_t c = 0; c < t->counters; ++c) e.counter_start[c] = 0;
  }
  for (uint32_t c = 0; c < t->counters; ++c) e.counter_children[c] = 0;
}

__attribute__((noinline)) inline void stop_counters(ThreadState* t, StackEntry& e, Node& n,
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

// Opens a frame of `routine` under the current one, not yet timed: returns nullptr when the call
// must not be measured (a kSuppress routine is running, no routine, the depth or node limit).
// start_frame must follow before anything else is measured on this thread.
template <bool kNewCall>
inline ThreadState* open_frame(ThreadState* t, RoutineId routine, Nesting nesting) {
  if (t->suppress != 0 || routine == 0) return nullptr;
  uint32_t d = t->depth_.load(std::memory_order_relaxed);
  if (__builtin_expect(d == t->max_depth_, 0)) {
    bump(t->depth_overflows, 1);
    return nullptr;
  }
  uint32_t parent = t->stack_[d].node.load(std::memory_order_relaxed);
  uint32_t node = t->child_of(parent, routine);
  if (__builtin_expect(node == parent, 0)) return nullptr;  // node limit: charged to the caller
  if constexpr (kNewCall) {
    bump(t->nodes[node].calls, 1);
    bump(t->nodes[parent].subrs, 1);
  }
  StackEntry& e = t->stack_[d + 1];
  e.node.store(node, std::memory_order_relaxed);
  e.nesting = nesting;
  e.child_ticks.store(0, std::memory_order_relaxed);
  // Raised now, so that anything the caller does before start_frame (a cost model) is not
  // measured as a nested call.
  t->suppress += nesting == Nesting::kSuppress;
  return t;
}

// Starts the clock of the frame open_frame opened, and makes it visible to the flusher.
inline void start_frame(ThreadState* t, uint64_t at) {
  uint32_t d = t->depth_.load(std::memory_order_relaxed);
  StackEntry& e = t->stack_[d + 1];
  if (__builtin_expect(t->counters != 0, 0)) start_counters(t, e);
  e.start.store(at, std::memory_order_relaxed);
  // The flusher reads depth first: the entry must be complete before it becomes visible.
  t->depth_.store(d + 1, std::memory_order_release);
}

// Closes the innermost frame at time `at`, charging its cost model's figures.
inline void close_frame(ThreadState* t, const CallCost* cost, const void* call_site,
                        uint64_t at) {
  uint32_t d = t->depth_.load(std::memory_order_relaxed);
  if (__builtin_expect(d == 0, 0)) return;  // unbalanced exit: nothing open to close
  StackEntry& e = t->stack_[d];
  uint64_t start = e.start.load(std::memory_order_relaxed);
  uint64_t elapsed = at > start ? at - start : 0;
  uint32_t node = e.node.load(std::memory_order_relaxed);
  Node& n = t->nodes[node];
  bump(n.incl_ticks, elapsed);
  uint64_t children = e.child_ticks.load(std::memory_order_relaxed);
  bump(n.excl_ticks, elapsed > children ? elapsed - children : 0);
  if (cost != nullptr) {
    bump(n.flops, cost->flops);
    bump(n.bytes, cost->bytes);
    if (cost->shape.dtype != DType::kNone) {
      t->record_shape(node, call_site, cost->shape, elapsed, cost->flops, cost->bytes);
    }
    if (cost->comm.kind != CommKind::kNone) t->record_comm(node, cost->comm, cost->bytes, elapsed);
  }
  if (t->trace) t->trace->push(TraceEvent{node, start, at});
  if (__builtin_expect(t->counters != 0, 0)) stop_counters(t, e, n, t->stack_[d - 1]);
  t->suppress -= e.nesting == Nesting::kSuppress;
  bump(t->stack_[d - 1].child_ticks, elapsed);
  t->depth_.store(d - 1, std::memory_order_release);
}

}  // namespace sonde
