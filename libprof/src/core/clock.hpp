// Timestamps for the hot path: rdtsc where the TSC is invariant, CLOCK_MONOTONIC otherwise.
// Ticks are converted to nanoseconds only at flush time, with a ratio measured over the whole
// life of the process, so start-up pays no calibration and long runs get the best ratio.
#pragma once

#include <cstdint>
#include <ctime>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

namespace sonde {

namespace clock_detail {
extern bool use_tsc;  // set once in Clock::init(), before any thread records
}

inline uint64_t now_ticks() {
#if defined(__x86_64__) || defined(__i386__)
  if (clock_detail::use_tsc) return __rdtsc();
#endif
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

int64_t monotonic_ns();
int64_t realtime_ns();

// Anchors taken at start-up; the conversion is refreshed at each flush.
class Clock {
 public:
  void init();
  // Ratio measured from init to now; call from the flushing thread only.
  void refresh();
  double ns_per_tick() const { return ns_per_tick_; }
  int64_t to_ns(uint64_t ticks) const { return int64_t(double(ticks) * ns_per_tick_); }
  // Wall-clock time (CLOCK_REALTIME ns) of a tick value, for timelines across processes.
  int64_t to_realtime_ns(uint64_t ticks) const {
    return realtime0_ + int64_t((double(ticks) - double(ticks0_)) * ns_per_tick_);
  }
  uint64_t ticks0() const { return ticks0_; }
  int64_t realtime0() const { return realtime0_; }
  bool tsc() const { return clock_detail::use_tsc; }

 private:
  uint64_t ticks0_ = 0;
  int64_t mono0_ = 0;
  int64_t realtime0_ = 0;
  double ns_per_tick_ = 1.0;
};

}  // namespace sonde
