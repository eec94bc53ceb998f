// The steps of one measured frame, with the time as a parameter: probe.cpp calls them with the
// clock, and the unit tests call the same code with chosen ticks, so every expected time is
// exact and no copy of the hot path exists. No lock, no allocation (except when a call path is
// new), no system call other than reading software counters.
#pragma once

#include <errno.h>

#include <algorithm>

#include "core/left_frames.hpp"
#include "core/thread_state.hpp"

namespace sonde {

// A sampled call timed at more than this many times its path's mean is an outlier: on a 1 us
// routine that is a preemption or a page fault, which would otherwise be multiplied by the rate.
inline constexpr uint64_t kOutlierFactor = 8;

// Counters are read after the bookkeeping on entry and before it on exit, so they cover the
// callee as closely as the timestamps do.
// Under a seccomp filter (counters_frozen, or g_counters_halted for every thread) a read is a
// system call the filter may kill for: nothing is read, and the figures stay as of the filter.
inline bool counters_frozen(const ThreadState* t) {
  return t->counters_frozen || g_counters_halted.load(std::memory_order_relaxed);
}

__attribute__((noinline)) inline void start_counters(ThreadState* t, StackEntry& e) {
  if (__builtin_expect(counters_frozen(t), 0) ||
      !t->counter_backend->read(t->counter_handle, e.counter_start)) {
    for (uint32_t c = 0; c < t->counters; ++c) e.counter_start[c] = 0;
  }
  for (uint32_t c = 0; c < t->counters; ++c) e.counter_children[c] = 0;
}

__attribute__((noinline)) inline void stop_counters(ThreadState* t, StackEntry& e, Node& n,
                                                    StackEntry& parent) {
  uint64_t now[kMaxCounters];
  if (__builtin_expect(counters_frozen(t), 0) || !t->counter_backend->read(t->counter_handle, now))
    return;
  for (uint32_t c = 0; c < t->counters; ++c) {
    uint64_t delta = now[c] > e.counter_start[c] ? now[c] - e.counter_start[c] : 0;
    bump(n.counter_incl[c], delta);
    bump(n.counter_excl[c], delta > e.counter_children[c] ? delta - e.counter_children[c] : 0);
    parent.counter_children[c] += delta;
  }
}

// Adaptive timing: a call on a sampled path is timed when the thread's xorshift draw, masked
// to the rate, is 0. Counts never depend on the draw, only whether the clock is read.
inline bool draw_untimed(ThreadState* t) {
  uint64_t x = t->rng;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  t->rng = x;
  return (x & t->adaptive.mask) != 0;
}

// The table slot of `node`'s outliers, claimed when it has none; nullptr when the table is full.
inline OutlierSums* outlier_slot(ThreadState* t, uint32_t node) {
  for (OutlierSums& o : t->outlier_sums) {
    uint32_t held = o.node.load(std::memory_order_relaxed);
    if (held == node) return &o;
    if (held == 0) {  // its sums are 0: published before any is bumped
      o.node.store(node, std::memory_order_release);
      return &o;
    }
  }
  return nullptr;
}

// A sampled path's timed call, added to the sums the flusher scales; the mean of those is
// what an untimed call charges its caller.
__attribute__((always_inline)) inline void add_timed(Node& n, uint64_t elapsed, uint64_t excl) {
  uint64_t k = n.timed.load(std::memory_order_relaxed) + 1;
  bump(n.timed_incl, elapsed);
  bump(n.timed_excl, excl);
  double sq = double(elapsed) * double(elapsed);
  n.timed_sq.store(n.timed_sq.load(std::memory_order_relaxed) + sq, std::memory_order_relaxed);
  n.timed.store(k, std::memory_order_release);
  n.mean_ticks = n.timed_incl.load(std::memory_order_relaxed) / k;
}

// A sampled timed call over the bound (kOutlierFactor x the path's mean): what exceeds it is
// kept apart, to be counted once at the flush instead of once per call the sample stands for.
// With the table full, the call is kept whole. Out of line, so the common case saves nothing.
__attribute__((noinline, cold)) inline void add_outlier(ThreadState* t, uint32_t node, Node& n,
                                                        uint64_t elapsed, uint64_t excl,
                                                        uint64_t bound) {
  if (OutlierSums* o = outlier_slot(t, node)) {
    uint64_t cut = elapsed - bound, cut_excl = std::min(excl, cut);
    bump(o->count, 1);
    bump(o->incl, cut);
    bump(o->excl, cut_excl);
    double sq = double(elapsed) * double(elapsed) - double(bound) * double(bound);
    o->sq.store(o->sq.load(std::memory_order_relaxed) + sq, std::memory_order_relaxed);
    elapsed = bound;
    excl -= cut_excl;
  }
  add_timed(n, elapsed, excl);
}

// A timed call of a path that is warming up or sampled (SONDE_ADAPTIVE). Warm-up: exact times,
// and after `warmup` calls the path is sampled if more than half of them were shorter than
// `short_ticks` (the median is), else timed in full for good. Sampled: the time adds up apart,
// with its square for the standard error, and the mean is what an untimed call charges its
// caller. Communication calls (`comm`) are always timed in full (comm_ops keeps per-call times).
__attribute__((noinline)) inline void charge_adaptive(ThreadState* t, uint32_t node, Node& n,
                                                      uint64_t elapsed, uint64_t excl, bool comm) {
  if (n.timing == AdaptiveTiming::kSampled) {
    uint64_t bound = kOutlierFactor * n.mean_ticks;
    if (__builtin_expect(elapsed > bound, 0) && n.mean_ticks > 0) {
      return add_outlier(t, node, n, elapsed, excl, bound);
    }
    return add_timed(n, elapsed, excl);
  }
  bump(n.incl_ticks, elapsed);
  bump(n.excl_ticks, excl);
  n.warm_fast += elapsed < t->adaptive.short_ticks;
  if (++n.warm_closed < t->adaptive.warmup) return;
  if (!comm && 2 * uint64_t(n.warm_fast) > n.warm_closed) {
    n.mean_ticks = n.incl_ticks.load(std::memory_order_relaxed) / n.warm_closed;
    n.warm_calls.store(n.calls.load(std::memory_order_relaxed), std::memory_order_relaxed);
    n.timing = AdaptiveTiming::kSampled;
  } else {
    n.timing = AdaptiveTiming::kFull;
  }
}

// Opens a frame of `routine` under the current one, not yet timed: returns nullptr when the call
// must not be measured (a kSuppress routine is running, no routine, the depth or node limit).
// start_frame must follow before anything else is measured on this thread. `cfa` and `sp`: a
// native wrapper's caller's stack address and its own stack pointer (see left_frames.hpp), 0
// for other frames. Always inlined: the wrappers inline the probe (probe_inline.hpp).
template <bool kNewCall>
__attribute__((always_inline)) inline ThreadState* open_frame(ThreadState* t, RoutineId routine,
                                                              Nesting nesting, uintptr_t cfa = 0,
                                                              uintptr_t sp = 0) {
  if (cfa != 0) {
    uintptr_t open = t->stack_[t->depth_.load(std::memory_order_relaxed)].sp;
    if (__builtin_expect(open != 0 && open < cfa, 0)) drop_abandoned(t, cfa);
  }
  // A suppressing routine refuses, unless a jump left it before its clock started; the
  // window's bit alone asks whether it has opened.
  if (__builtin_expect(t->suppress != 0, 0) &&
      (t->suppress != ThreadState::kWindowClosed ? cfa == 0 || still_suppressed(t, cfa)
                                                 : t->held_back())) {
    return nullptr;
  }
  if (routine == 0) return nullptr;
  uint32_t d = t->depth_.load(std::memory_order_relaxed);
  if (__builtin_expect(d == t->stack_.room(), 0) && !t->stack_.grow(d)) {
    bump(t->depth_overflows, 1);
    return nullptr;
  }
  uint32_t parent = t->stack_[d].node.load(std::memory_order_relaxed);
  uint32_t node = t->child_of(parent, routine);
  if (__builtin_expect(node == parent, 0)) return nullptr;  // node limit: charged to the caller
  bool untimed = false;
  if constexpr (kNewCall) {
    Node& n = t->nodes[node];
    bump(n.calls, 1);
    bump(t->nodes[parent].subrs, 1);
    // The thread's flag first: with adaptive timing off, the node's later cache line is untouched.
    if (__builtin_expect(t->adaptive.mask != 0, 0) && n.timing == AdaptiveTiming::kSampled) {
      untimed = draw_untimed(t);
    }
  } else if (__builtin_expect(t->adaptive.mask != 0, 0)) {
    // A resumed generator: its entries outnumber its calls, so scaling by calls would be wrong.
    // Seen in the warm-up, the path is timed in full; a path already sampled times its resumes.
    Node& n = t->nodes[node];
    if (n.timing == AdaptiveTiming::kWarmUp) n.timing = AdaptiveTiming::kFull;
  }
  StackEntry& e = t->stack_[d + 1];
  e.node.store(node, std::memory_order_relaxed);
  e.nesting = nesting;
  e.untimed = untimed;
  e.sp = sp;
  e.child_ticks.store(0, std::memory_order_relaxed);
  // Raised now, so that anything the caller does before start_frame (a cost model) is not
  // measured as a nested call; after the entry is written, which a jump before start_frame
  // leaves for the next call to judge the raised flag by (left_frames.hpp).
  std::atomic_signal_fence(std::memory_order_release);
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

// start_frame for a call adaptive timing left untimed: the frame is visible, its clock unread.
inline void start_untimed(ThreadState* t) {
  uint32_t d = t->depth_.load(std::memory_order_relaxed);
  t->stack_[d + 1].start.store(kUntimed, std::memory_order_relaxed);
  t->depth_.store(d + 1, std::memory_order_release);
}

// Out of line: every wrapper inlines close_frame, and few runs trace.
__attribute__((noinline)) inline void push_trace(TraceRing& ring, uint32_t node, uint64_t start,
                                                 uint64_t end) {
  ring.push(TraceEvent{node, start, end});
}

// Closes the innermost frame at time `at`, charging its cost model's figures.
// Always inlined: beside close_untimed in end_call, GCC otherwise made it a call of its own
// (1.4 ns more per call on the call-cost benchmark with adaptive timing off).
__attribute__((always_inline)) inline void close_frame(ThreadState* t, const CallCost* cost,
                                                       const void* call_site, uint64_t at) {
  uint32_t d = t->depth_.load(std::memory_order_relaxed);
  if (__builtin_expect(d == 0, 0)) return;  // unbalanced exit: nothing open to close
  StackEntry& e = t->stack_[d];
  uint64_t start = e.start.load(std::memory_order_relaxed);
  uint64_t elapsed = at > start ? at - start : 0;
  uint32_t node = e.node.load(std::memory_order_relaxed);
  Node& n = t->nodes[node];
  uint64_t children = e.child_ticks.load(std::memory_order_relaxed);
  uint64_t excl = elapsed > children ? elapsed - children : 0;
  if (__builtin_expect(t->adaptive.mask != 0 && n.timing != AdaptiveTiming::kFull, 0)) {
    charge_adaptive(t, node, n, elapsed, excl,
                    cost != nullptr && cost->comm.kind != CommKind::kNone);
  } else {
    bump(n.incl_ticks, elapsed);
    bump(n.excl_ticks, excl);
  }
  if (cost != nullptr) {
    bump(n.flops, cost->flops);
    bump(n.bytes, cost->bytes);
    if (cost->shape.dtype != DType::kNone) {
      t->record_shape(node, call_site, cost->shape, elapsed, cost->flops, cost->bytes);
    }
    if (cost->comm.kind != CommKind::kNone) t->record_comm(node, cost->comm, cost->bytes, elapsed);
  }
  if (t->trace) push_trace(*t->trace, node, start, at);
  if (__builtin_expect(t->counters != 0, 0)) stop_counters(t, e, n, t->stack_[d - 1]);
  t->suppress -= e.nesting == Nesting::kSuppress;
  bump(t->stack_[d - 1].child_ticks, elapsed);
  t->depth_.store(d - 1, std::memory_order_release);
}

// Closes the innermost frame when adaptive timing left it untimed: exact counts and cost-model
// figures, no clock read; its caller's children are charged the path's mean time, so the
// caller's exclusive time stays its own (a frame without a cost model: a CallCost of zeros).
// Out of line, adaptive timing's side of every wrapper; the cost by value, so that a wrapper's
// never has its address taken (see ThreadState::record_shape).
__attribute__((noinline)) inline void close_untimed(ThreadState* t, CallCost cost,
                                                    const void* call_site) {
  uint32_t d = t->depth_.load(std::memory_order_relaxed);
  StackEntry& e = t->stack_[d];
  uint32_t node = e.node.load(std::memory_order_relaxed);
  Node& n = t->nodes[node];
  bump(n.flops, cost.flops);
  bump(n.bytes, cost.bytes);
  if (cost.shape.dtype != DType::kNone) {
    t->record_shape(node, call_site, cost.shape, 0, cost.flops, cost.bytes, false);
  }
  t->suppress -= e.nesting == Nesting::kSuppress;
  bump(t->stack_[d - 1].child_ticks, n.mean_ticks);
  t->depth_.store(d - 1, std::memory_order_release);
}

// Takes back the innermost frame of a call that never ran: its call and its caller's subrs are
// undone, nothing is charged (its moment stays the caller's own), and no trace event is written.
inline void cancel_frame(ThreadState* t) {
  uint32_t d = t->depth_.load(std::memory_order_relaxed);
  if (d == 0) return;
  StackEntry& e = t->stack_[d];
  bump(t->nodes[e.node.load(std::memory_order_relaxed)].calls, ~uint64_t(0));
  bump(t->nodes[t->stack_[d - 1].node.load(std::memory_order_relaxed)].subrs, ~uint64_t(0));
  t->suppress -= e.nesting == Nesting::kSuppress;
  t->depth_.store(d - 1, std::memory_order_release);
}

// A new call's start and its end as probe_enter/probe_start and probe_exit run them: `now`
// reads the clock, and is not called for a call adaptive timing leaves untimed.
// Only adaptive timing leaves a call untimed: its mask, in the thread's own line, is tested
// before the frame's flag, whose address takes the stack pointer and the depth.
template <class Now>
__attribute__((always_inline)) inline void begin_call(ThreadState* t, Now now) {
  if (__builtin_expect(t->adaptive.mask != 0, 0) && t->stack_[t->depth() + 1].untimed) {
    start_untimed(t);
  } else {
    start_frame(t, now());
  }
}

template <class Now>
__attribute__((always_inline)) inline void end_call(ThreadState* t, const CallCost* cost,
                                                    const void* call_site, Now now) {
  // Depth 0 (an unbalanced exit) is never untimed: close_frame ignores it.
  if (__builtin_expect(t->adaptive.mask != 0, 0) && t->stack_[t->depth()].untimed) {
    close_untimed(t, cost != nullptr ? *cost : CallCost{}, call_site);
  } else {
    close_frame(t, cost, call_site, now());
  }
}

// A switch of call stacks inside the thread (probe_suspend_stack): every open frame is closed at
// `at`, innermost first, as a yield closes a generator's, and listed in `out` outermost first.
// The caller has room for depth() entries.
inline uint32_t suspend_stack(ThreadState* t, SuspendedFrame* out, uint64_t at) {
  uint32_t n = t->depth();
  for (uint32_t d = n; d >= 1; --d) {
    const StackEntry& e = t->stack_[d];
    out[d - 1] = {t->node_ref(e.node.load(std::memory_order_relaxed)), e.nesting};
    end_call(t, nullptr, nullptr, [at] { return at; });
  }
  return n;
}

// Puts frames set aside by suspend_stack back on top of the stack, started at `at`, as resumed
// generators: no call counted, and none refused (a hook will close each of them), except past
// the depth limit, where the rest are left off and their closes find nothing to close.
inline void resume_stack(ThreadState* t, const SuspendedFrame* frames, uint32_t n, uint64_t at) {
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t d = t->depth();
    if (d == t->stack_.room() && !t->stack_.grow(d)) return;
    // Not this thread's tree (set aside before a fork, or by another thread): nothing to resume.
    uint32_t node = t->node_of_ref(frames[i].node);
    if (node == ThreadState::kNoNode) return;
    // A warming-up path resumed is timed in full, as open_frame<false> has it.
    Node& nd = t->nodes[node];
    if (t->adaptive.mask != 0 && nd.timing == AdaptiveTiming::kWarmUp)
      nd.timing = AdaptiveTiming::kFull;
    StackEntry& e = t->stack_[d + 1];
    e.node.store(node, std::memory_order_relaxed);
    e.nesting = frames[i].nesting;
    e.untimed = false;
    e.sp = 0;
    e.child_ticks.store(0, std::memory_order_relaxed);
    t->suppress += frames[i].nesting == Nesting::kSuppress;
    start_frame(t, at);
  }
}

}  // namespace sonde
