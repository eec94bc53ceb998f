#include "core/adaptive_timing.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace sonde {

namespace {
constexpr uint32_t kDefaultRate = 16;
constexpr uint32_t kWarmUpCalls = 10000;
constexpr double kShortNs = 1000.0;  // a median under 1 us: timing costs a sizeable share
// Outliers among more than 1 in this many timed calls are the routine's own (a slow branch),
// not the machine's. The machine's stalls reached 1 in 2,000 calls of a 0.4 us path on this VM
// under SCHED_FIFO and past 1 in 1,000 on a loaded one: a switch near their rate is crossed in
// the runs whose sample happened to catch more of them, and those were scaled 16-fold (+10 to
// +25 %, past the run's own wall time). Far above it, a stall is counted once.
constexpr uint64_t kRareOutliers = 200;
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

const OutlierSums* outliers_of(const ThreadState& t, uint32_t node) {
  for (const OutlierSums& o : t.outlier_sums) {
    if (o.node.load(std::memory_order_acquire) == node) return &o;
  }
  return nullptr;
}

NodeTimes node_times(const Node& n, uint64_t calls, const OutlierSums* o) {
  constexpr auto kRelaxed = std::memory_order_relaxed;
  NodeTimes r{int64_t(n.incl_ticks.load(kRelaxed)), int64_t(n.excl_ticks.load(kRelaxed)), 0, 0, 0};
  uint64_t k = n.timed.load(std::memory_order_acquire);
  if (k == 0) return r;
  uint64_t warm = n.warm_calls.load(kRelaxed);
  uint64_t big_n = calls > warm ? calls - warm : 0;
  if (big_n < k) big_n = k;  // a call counted after its timing was read
  // The timed calls' sums hold outliers clipped to kOutlierFactor x the mean. Rare ones (a
  // preemption, a fault) are one-off events: what was cut off counts once, as it happened, and
  // enters the error whole (it may be the machine's, not the routine's). Frequent ones are the
  // routine's own tail and are scaled like every other timed call.
  uint64_t outliers = o ? o->count.load(kRelaxed) : 0;
  double cut = o ? double(o->incl.load(kRelaxed)) : 0.0;
  double cut_excl = o ? double(o->excl.load(kRelaxed)) : 0.0;
  bool tail = outliers * kRareOutliers > k;
  double sum = double(n.timed_incl.load(kRelaxed)) + (tail ? cut : 0.0);
  double sum_excl = double(n.timed_excl.load(kRelaxed)) + (tail ? cut_excl : 0.0);
  double sq = n.timed_sq.load(kRelaxed) + (tail && o ? o->sq.load(kRelaxed) : 0.0);
  double once = tail ? 0.0 : cut, once_excl = tail ? 0.0 : cut_excl;
  double scale = double(big_n) / double(k);
  r.incl_ticks += int64_t(std::llround(sum * scale + once));
  r.excl_ticks += int64_t(std::llround(sum_excl * scale + once_excl));
  r.timed = k;
  r.sampled = big_n;
  r.outliers = outliers;
  if (k >= 2) {
    double var = std::max(0.0, (sq - sum * sum / double(k)) / double(k - 1));
    double fpc = 1.0 - double(k) / double(big_n);
    double se = double(big_n) * std::sqrt(var / double(k) * std::max(0.0, fpc));
    r.se_ticks = std::sqrt(se * se + once * once);
  } else {
    r.se_ticks = once;
  }
  return r;
}

}  // namespace sonde
