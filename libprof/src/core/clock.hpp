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

// A tick reading and the monotonic time it stands for. Read as mono, ticks, mono: a thread
// preempted between two reads (a scheduler slice, 3-4 ms on a loaded VM) would pair a tick
// with a later time, putting a 0.3 s process's ratio, and so its durations, about 1 % off (a
// loaded test run saw a rank's 240 ms sleep recorded 1.5 % short). So the tightest of a few
// tries is kept, its time taken as the middle of its window; a window of a few microseconds
// is taken at once.
struct ClockPair {
  uint64_t ticks = 0;
  int64_t mono_ns = 0;
  int64_t window_ns = 0;
};
inline constexpr int kClockPairTries = 8;
inline constexpr int64_t kClockPairTightNs = 2000;
template <class Ticks, class Mono>
ClockPair read_clock_pair(Ticks ticks, Mono mono) {
  ClockPair best;
  best.window_ns = INT64_MAX;
  for (int i = 0; i < kClockPairTries && best.window_ns > kClockPairTightNs; ++i) {
    int64_t before = mono();
    uint64_t t = ticks();
    int64_t after = mono();
    if (after - before < best.window_ns) best = {t, before + (after - before) / 2, after - before};
  }
  return best;
}

// Anchors taken at start-up; the conversion is refreshed at each flush.
class Clock {
 public:
  // The anchors alone: the ratio is measured at the first flush, over all the time since (a
  // 200 us measure here was 0.2 ms of every profiled process's start).
  void init();
  // Ratio measured from init to now; call from the flushing thread only.
  void refresh();
  // refresh() over at least 200 us since init, waiting out what is left of them: for a
  // conversion needed before any flush (the adaptive timing's threshold in ticks).
  void calibrate();
  // refresh() with the readings given (tests drive it with made-up ones).
  void refresh_at(uint64_t ticks, int64_t mono_ns);
  double ns_per_tick() const { return ns_per_tick_; }
  // Durations take the best ratio so far: a duration is converted once, at the flush that
  // writes it, so a better ratio later cannot make two durations disagree.
  int64_t to_ns(uint64_t ticks) const { return int64_t(double(ticks) * ns_per_tick_); }
  // Wall-clock time (CLOCK_REALTIME ns) of a tick value, for timelines across processes.
  // Timestamps take a ratio frozen once a second of ticks has been measured: a call written
  // at a later flush than its first child must still start before it, and a ratio refined at
  // each flush moved long calls by up to 60 us against children written earlier (a 2-step
  // torch trace had 97 such pairs).
  int64_t to_realtime_ns(uint64_t ticks) const {
    return realtime0_ + int64_t((double(ticks) - double(ticks0_)) * timeline_ns_per_tick_);
  }
  uint64_t ticks0() const { return ticks0_; }
  int64_t realtime0() const { return realtime0_; }
  int64_t mono0() const { return mono0_; }
  bool tsc() const { return clock_detail::use_tsc; }

 private:
  uint64_t ticks0_ = 0;
  int64_t mono0_ = 0;
  int64_t realtime0_ = 0;
  double ns_per_tick_ = 1.0;
  double timeline_ns_per_tick_ = 1.0;
  bool timeline_frozen_ = false;
};

}  // namespace sonde
