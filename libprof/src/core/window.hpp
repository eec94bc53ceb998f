// The collection window (SONDE_DELAY, SONDE_STEPS): until it opens, no call, Python frame,
// region, sample or GPU activity is measured, so start-up and warm-up stay out of the profile;
// once open it stays open, and every call from then on is counted exactly. Closed only when the
// run asks for a window. The runtime owns the one window of a process; each thread's state holds
// a bit of it (ThreadState::kWindowClosed), so the per-call path reads no shared flag.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace sonde {

// Where the window comes from; set once by the runtime before any thread records.
struct WindowSpec {
  double delay_s = 0;       // opens this long after the launch (or the process's start)
  uint64_t steps = 0;       // opens as the step region begins for the (steps+1)-th time
  std::string step_region;  // the region counted as one step ("step")
  int64_t deadline_ns = 0;  // CLOCK_REALTIME: the launch's deadline (SONDE_DELAY_UNTIL), 0 none
};

class CollectionWindow {
 public:
  // `started_mono_ns`, `started_real_ns`: the process's start on the two clocks. A launch's
  // deadline wins over the process's own delay: every process of the run opens at one instant.
  void init(const WindowSpec& spec, int64_t started_mono_ns, int64_t started_real_ns);

  // Any thread, signal handlers included (atomics only): whether nothing may be measured yet.
  // Past the delay's deadline (the monotonic clock: the vDSO, no system call) it opens.
  bool closed() {
    if (__builtin_expect(!closed_.load(std::memory_order_acquire), 1)) return false;
    return still_closed();
  }

  // A region begins while the window is closed: counts it when it is the step region, and
  // returns whether the window is open now (this begin is then the first recorded step).
  bool region_begins(const char* name);

  // For the notes, the process row and the GPU records: whether a window was asked for, when
  // it opened (monotonic ns, 0 while closed), and how many steps have begun.
  bool requested() const { return requested_; }
  int64_t opened_mono_ns() const { return opened_ns_.load(std::memory_order_acquire); }
  uint64_t steps_seen() const { return steps_.load(std::memory_order_relaxed); }
  const WindowSpec& spec() const { return spec_; }

 private:
  bool still_closed();
  void open_now(int64_t at);

  WindowSpec spec_;
  bool requested_ = false;
  int64_t deadline_ns_ = 0;  // monotonic; 0: no delay
  std::atomic<bool> closed_{false};
  std::atomic<int64_t> opened_ns_{0};
  std::atomic<uint64_t> steps_{0};
};

}  // namespace sonde
