#include "core/clock.hpp"

#include <chrono>
#include <thread>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace sonde {

namespace clock_detail {
bool use_tsc = false;
}

namespace {

bool invariant_tsc() {
#if defined(__x86_64__)
  unsigned a, b, c, d;
  if (__get_cpuid_max(0x80000000u, nullptr) < 0x80000007u) return false;
  __cpuid(0x80000007u, a, b, c, d);
  return (d & (1u << 8)) != 0;  // "Invariant TSC": constant rate in all P-, C- and T-states
#else
  return false;
#endif
}

}  // namespace

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

int64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

void Clock::init() {
  clock_detail::use_tsc = invariant_tsc();
  ClockPair p = read_clock_pair(now_ticks, monotonic_ns);
  ticks0_ = p.ticks;
  mono0_ = p.mono_ns;
  // The wall clock at mono0_, read the same way.
  ClockPair wall = read_clock_pair([] { return uint64_t(realtime_ns()); }, monotonic_ns);
  realtime0_ = int64_t(wall.ticks) - (wall.mono_ns - mono0_);
  ns_per_tick_ = 1.0;
  timeline_ns_per_tick_ = 1.0;
  timeline_frozen_ = false;
}

void Clock::calibrate() {
  if (!clock_detail::use_tsc) return;
  int64_t until = mono0_ + 200000;
  while (monotonic_ns() < until) {
  }
  refresh();
}

void Clock::refresh() {
  if (!clock_detail::use_tsc) return;
  ClockPair p = read_clock_pair(now_ticks, monotonic_ns);
  refresh_at(p.ticks, p.mono_ns);
}

void Clock::refresh_at(uint64_t t, int64_t m) {
  if (t > ticks0_ && m > mono0_) ns_per_tick_ = double(m - mono0_) / double(t - ticks0_);
  if (timeline_frozen_) return;
  timeline_ns_per_tick_ = ns_per_tick_;
  // A ratio over one second is within a few parts in 10^8 of the final one with a
  // nanosecond clock; a shorter-lived process keeps the best it had at each flush.
  timeline_frozen_ = m - mono0_ >= 1000000000;
}

}  // namespace sonde
