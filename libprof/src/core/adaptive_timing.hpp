// Adaptive timing of tiny hot routines (SONDE_ADAPTIVE): counts stay exact, and a call path
// whose calls are both frequent and short is timed on a random sample of its calls. The hot
// path's part is in frame_ops.hpp (draw_untimed, charge_adaptive, close_untimed); this is the
// set-up and the flusher's scaling.
#pragma once

#include <cstdint>

#include "core/thread_state.hpp"

namespace sonde {

// The threads' settings for SONDE_ADAPTIVE=`value` (1: 1 call in 16; N: 1 in N rounded down to
// a power of two) on a clock of `ns_per_tick`; value 0 gives mask 0, off.
AdaptiveConfig make_adaptive_config(uint32_t value, double ns_per_tick);

// A seed for a thread's draw: distinct per thread and per run, never 0 (xorshift's fixed point).
uint64_t adaptive_seed(uint64_t a, uint64_t b);

// One node's times in ticks with its sampled part scaled up to all the calls it stands for:
// warm-up ticks + sampled ticks x (calls after warm-up / timed calls). `se_ticks` is the
// standard error of the inclusive estimate (sample variance, finite-population corrected,
// with a rare outlier's cut-off part counted once and added to it whole); `timed` is 0 when
// nothing was scaled (the figures are then exact).
struct NodeTimes {
  int64_t incl_ticks, excl_ticks;
  double se_ticks;
  uint64_t timed;         // timed calls of the sampled part
  uint64_t sampled;       // calls of the sampled part (timed or not)
  uint64_t outliers = 0;  // timed calls clipped to kOutlierFactor x the path's mean (rare or not)
};
// `o`: the path's outliers (outliers_of), nullptr when it has none.
NodeTimes node_times(const Node& n, uint64_t calls, const OutlierSums* o = nullptr);

// The thread's outlier sums of `node`, nullptr when it has none.
const OutlierSums* outliers_of(const ThreadState& t, uint32_t node);

}  // namespace sonde
