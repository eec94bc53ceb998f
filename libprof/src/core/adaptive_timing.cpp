#include "core/adaptive_timing.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace sonde {

namespace {
constexpr uint32_t kDefaultRate = 16;
constexpr uint32_t kWarmUpCalls = 10000;
constexpr double kShortNs = 1000.0;  // a median under 1 us: timing costs a sizeable share
}  // namespace

AdaptiveConfig make_adaptive_config(uint32_t value, double ns_per_tick) {
  AdaptiveConfig c;
  if (value == 0) return c;
  uint32_t rate = value == 1 ? kDefaultRate : std::bit_floor(value);
  c.mask = rate - 1;
  c.warmup = kWarmUpCalls;
  c.short_ticks = uint64_t(kShortNs / (ns_per_tick > 0 ? ns_per_tick : 1.0));
  return c;
}

uint64_t adaptive_seed(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b;  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return z != 0 ? z : 0x2545F4914F6CDD1Dull;
}

NodeTimes node_times(const Node& n, uint64_t calls) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  NodeTimes r{int64_t(n.incl_ticks.load(kRelaxed)), int64_t(n.excl_ticks.load(kRelaxed)), 0, 0,
              0};
  uint64_t k = n.timed.load(std::memory_order_acquire);
  if (k == 0) return r;
  uint64_t warm = n.warm_calls.load(kRelaxed);
  uint64_t big_n = calls > warm ? calls - warm : 0;
  if (big_n < k) big_n = k;  // a call counted after its timing was read
  double sum = double(n.timed_incl.load(kRelaxed));
  double scale = double(big_n) / double(k);
  r.incl_ticks += int64_t(std::llround(sum * scale));
  r.excl_ticks += int64_t(std::llround(double(n.timed_excl.load(kRelaxed)) * scale));
  r.timed = k;
  r.sampled = big_n;
  if (k >= 2) {
    double sq = n.timed_sq.load(kRelaxed);
    double var = std::max(0.0, (sq - sum * sum / double(k)) / double(k - 1));
    double fpc = 1.0 - double(k) / double(big_n);
    r.se_ticks = double(big_n) * std::sqrt(var / double(k) * std::max(0.0, fpc));
  }
  return r;
}

}  // namespace sonde
