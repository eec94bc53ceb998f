// Drives a ThreadState through the hot path's own steps (core/frame_ops.hpp, which
// probe_enter/probe_exit run with the clock) with tick values chosen by the test, so every
// expected time is exact. Nothing of the hot path is re-implemented here.
#pragma once

#include <stdexcept>

#include "core/frame_ops.hpp"

namespace sonde::test {

// Returns the node the frame was opened on.
inline uint32_t enter_at(ThreadState& t, RoutineId routine, uint64_t at,
                         Nesting nesting = Nesting::kChildren) {
  if (open_frame<true>(&t, routine, nesting) == nullptr) {
    throw std::logic_error("the hot path refused the frame");
  }
  start_frame(&t, at);
  return t.top().node.load();
}

inline void leave_at(ThreadState& t, uint64_t at, const CallCost* cost = nullptr,
                     const void* site = nullptr) {
  close_frame(&t, cost, site, at);
}

}  // namespace sonde::test
