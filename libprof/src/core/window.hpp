// The collection window (SONDE_DELAY, SONDE_STEPS): until it opens, no call, Python frame or
// region is measured, so start-up and warm-up stay out of the profile; once open it stays open,
// and every call from then on is counted exactly. Closed only when the run asks for a window.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace sonde {

extern std::atomic<bool> g_window_closed;

// Where the window comes from; set once by the runtime before any thread records.
struct WindowSpec {
  double delay_s = 0;        // opens this long after the process started
  uint64_t steps = 0;        // opens as the step region begins for the (steps+1)-th time
  std::string step_region;   // the region counted as one step ("step")
};

void window_init(const WindowSpec& spec, int64_t started_mono_ns);

// The slow side, reached only while the window is closed: the delay's deadline read from the
// monotonic clock (the vDSO, no system call).
bool window_still_closed();

// The hot path's check: one relaxed load while the window is open.
inline bool window_closed() {
  if (__builtin_expect(!g_window_closed.load(std::memory_order_relaxed), 1)) return false;
  return window_still_closed();
}

// A region begins while the window is closed: counts it when it is the step region, and
// returns whether the window is open now (this begin is then the first recorded step).
bool window_region_begins(const char* name);

// For the notes and the process row: whether a window was asked for, when it opened
// (monotonic ns, 0 while closed), and how many steps have begun.
bool window_requested();
int64_t window_opened_mono_ns();
uint64_t window_steps_seen();
WindowSpec window_spec();

}  // namespace sonde
