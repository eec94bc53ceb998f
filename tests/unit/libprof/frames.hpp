// Drives a ThreadState the way probe_enter/probe_exit (libprof/src/core/probe.cpp) do, but with tick
// values chosen by the test instead of the clock, so every expected time is exact.
#pragma once

#include "core/thread_state.hpp"

namespace sonde::test {

inline uint32_t enter_at(ThreadState& t, RoutineId routine, uint64_t at) {
  uint32_t d = t.depth();
  uint32_t parent = t.stack_[d].node.load();
  uint32_t node = t.child_of(parent, routine);
  bump(t.nodes[node].calls, 1);
  bump(t.nodes[parent].subrs, 1);
  StackEntry& e = t.stack_[d + 1];
  e.node.store(node);
  e.nesting = Nesting::kChildren;
  e.child_ticks.store(0);
  e.start.store(at);
  t.depth_.store(d + 1);
  return node;
}

inline void leave_at(ThreadState& t, uint64_t at, const CallCost* cost = nullptr,
                     const void* site = nullptr) {
  uint32_t d = t.depth();
  StackEntry& e = t.stack_[d];
  uint64_t elapsed = at - e.start.load();
  Node& n = t.nodes[e.node.load()];
  bump(n.incl_ticks, elapsed);
  uint64_t children = e.child_ticks.load();
  bump(n.excl_ticks, elapsed > children ? elapsed - children : 0);
  if (cost != nullptr) {
    bump(n.flops, cost->flops);
    bump(n.bytes, cost->bytes);
    if (cost->shape.dtype != DType::kNone) {
      t.record_shape(e.node.load(), site, cost->shape, elapsed, cost->flops, cost->bytes);
    }
  }
  bump(t.stack_[d - 1].child_ticks, elapsed);
  t.depth_.store(d - 1);
}

}  // namespace sonde::test
