#include "core/window.hpp"

#include <cstring>

#include "core/clock.hpp"

namespace sonde {

void CollectionWindow::init(const WindowSpec& spec, int64_t started_mono_ns,
                            int64_t started_real_ns) {
  spec_ = spec;
  requested_ = spec.delay_s > 0 || spec.steps > 0 || spec.deadline_ns > 0;
  if (!requested_) return;
  // Steps take precedence: a delay and a step count together would be two windows.
  if (spec.steps > 0) {
    deadline_ns_ = 0;
  } else if (spec.deadline_ns > 0) {
    // The launch's instant on this process's monotonic clock; one already past opens at once
    // (at the process's start: nothing of it was before the deadline).
    int64_t left = spec.deadline_ns - started_real_ns;
    deadline_ns_ = started_mono_ns + (left > 0 ? left : 0);
    if (left <= 0) {
      open_now(started_mono_ns);
      return;
    }
  } else {
    deadline_ns_ = started_mono_ns + int64_t(spec.delay_s * 1e9);
  }
  closed_.store(true, std::memory_order_release);
}

bool CollectionWindow::still_closed() {
  if (deadline_ns_ == 0 || monotonic_ns() < deadline_ns_) {
    return closed_.load(std::memory_order_acquire);
  }
  open_now(deadline_ns_);
  return false;
}

// `at`: when it opened (the delay's deadline, which the first call after it only notices).
void CollectionWindow::open_now(int64_t at) {
  int64_t expected = 0;
  opened_ns_.compare_exchange_strong(expected, at, std::memory_order_acq_rel);
  closed_.store(false, std::memory_order_release);
}

bool CollectionWindow::region_begins(const char* name) {
  if (!closed()) return true;
  if (spec_.steps == 0 || name == nullptr || std::strcmp(spec_.step_region.c_str(), name) != 0)
    return false;
  // Every thread's begins count: the step that opens the window is the (steps+1)-th of all.
  if (steps_.fetch_add(1, std::memory_order_relaxed) + 1 <= spec_.steps) return false;
  open_now(monotonic_ns());
  return true;
}

}  // namespace sonde
