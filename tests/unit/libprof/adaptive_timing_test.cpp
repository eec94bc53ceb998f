// Adaptive timing (SONDE_ADAPTIVE) through the hot path's own steps (begin_call / end_call, as
// probe_enter and probe_exit run them) with chosen ticks: counts stay exact, a short hot path is
// sampled after its warm-up, its scaled time is within 2 % of full timing, a caller's exclusive
// time is kept, and long or communication paths are always timed in full.
#include "core/adaptive_timing.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "core/clock.hpp"
#include "core/frame_ops.hpp"
#include "core/snapshot.hpp"

namespace sonde {
namespace {

constexpr uint64_t kMissed = ~uint64_t(0);

// One call of `routine` from `start` to `end`; returns how many clock reads it took.
int call(ThreadState& t, RoutineId routine, uint64_t start, uint64_t end,
         const CallCost* cost = nullptr, Nesting nesting = Nesting::kSuppress) {
  int reads = 0;
  if (open_frame<true>(&t, routine, nesting) == nullptr) throw std::logic_error("refused");
  begin_call(&t, [&] {
    ++reads;
    return start;
  });
  end_call(&t, cost, nullptr, [&] {
    ++reads;
    return end;
  });
  return reads;
}

void make_adaptive(ThreadState& t, uint32_t rate) {
  t.adaptive = make_adaptive_config(rate, 1.0);  // 1 ns per tick: short = under 1000 ticks
  t.rng = adaptive_seed(42, 7);
}

// A steady routine: 300 ticks +- a deterministic jitter of up to 10 %, with a gap of 50 between
// calls; the same sequence of costs for every thread that runs it.
struct Steady {
  uint64_t clock = 1000, seed = 12345;
  uint64_t next_cost() {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return 270 + (seed >> 33) % 61;
  }
};

TEST(AdaptiveTiming, OffTimesEveryCall) {
  ThreadState t(0, 1, 0, 16, 0);
  for (int i = 0; i < 20000; ++i) EXPECT_EQ(call(t, 5, 10 * i, 10 * i + 3), 2);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 60000u);
  EXPECT_EQ(t.nodes[1].timed.load(), 0u);
}

TEST(AdaptiveTiming, AShortHotPathIsScaledWithin2PercentOfFullTimingCountsExact) {
  ThreadState full(0, 1, 0, 16, 0);
  ThreadState adaptive(0, 1, 0, 16, 0);  // 1 in 16
  make_adaptive(adaptive, 1);
  Steady a, b;
  constexpr int kCalls = 400000;
  int reads = 0;
  for (int i = 0; i < kCalls; ++i) {
    uint64_t c = a.next_cost();
    call(full, 5, a.clock, a.clock + c);
    a.clock += c + 50;
    c = b.next_cost();
    reads += call(adaptive, 5, b.clock, b.clock + c);
    b.clock += c + 50;
  }
  const Node& f = full.nodes[1];
  const Node& n = adaptive.nodes[1];
  EXPECT_EQ(n.calls.load(), uint64_t(kCalls));
  EXPECT_EQ(n.warm_calls.load(), 10000u);
  // About 1 in 16 of the calls after the warm-up read the clock (twice each).
  double timed = double(n.timed.load());
  EXPECT_NEAR(timed, (kCalls - 10000) / 16.0, 0.05 * (kCalls - 10000) / 16.0);
  EXPECT_EQ(uint64_t(reads), 2 * (10000 + n.timed.load()));
  NodeTimes scaled = node_times(n, n.calls.load());
  double exact = double(f.incl_ticks.load());
  EXPECT_NEAR(double(scaled.incl_ticks), exact, 0.02 * exact);
  EXPECT_NEAR(double(scaled.excl_ticks), double(f.excl_ticks.load()), 0.02 * exact);
  // The error said is the right size: the jitter's spread over ~24k timed calls, not 0.
  EXPECT_GT(scaled.se_ticks, 0.0);
  EXPECT_LT(scaled.se_ticks, 0.002 * exact);
  EXPECT_LT(std::fabs(double(scaled.incl_ticks) - exact), 4 * scaled.se_ticks + 1);
}

// 400k Steady calls; the first call from `inflate_from` on whose clock is read costs `extra`
// ticks more (with full timing: call `inflate_from` itself), as a preemption would.
void steady_with_one_outlier(ThreadState& t, uint64_t extra, int inflate_from = 200000) {
  Steady s;
  bool inflated = false;
  for (int i = 0; i < 400000; ++i) {
    uint64_t c = s.next_cost();
    if (open_frame<true>(&t, 5, Nesting::kSuppress) == nullptr) throw std::logic_error("refused");
    begin_call(&t, [&] { return s.clock; });
    if (!inflated && i >= inflate_from && !t.top().untimed) {
      c += extra;
      inflated = true;
    }
    end_call(&t, nullptr, nullptr, [&] { return s.clock + c; });
    s.clock += c + 50;
  }
  if (!inflated) throw std::logic_error("no timed call to inflate");
}

TEST(AdaptiveTiming, OnePreemptedTimedCallIsCountedOnceAndTheErrorCoversIt) {
  // 4 ms of preemption in one timed call of a ~300 ns path (1.2e8 ticks in all): multiplied by
  // the rate, it made the estimate 50 % high, with a stated error of a third of that excess.
  constexpr uint64_t kPreempted = 4000000;
  ThreadState full(0, 1, 0, 16, 0), adaptive(0, 1, 0, 16, 0);
  make_adaptive(adaptive, 1);
  steady_with_one_outlier(full, kPreempted);
  steady_with_one_outlier(adaptive, kPreempted);
  const Node& n = adaptive.nodes[1];
  NodeTimes scaled = node_times(n, n.calls.load(), outliers_of(adaptive, 1));
  EXPECT_EQ(scaled.outliers, 1u);
  // The truth as full timing saw it (the preemption once), and the routine's own cost alone.
  double exact = double(full.nodes[1].incl_ticks.load());
  double own = exact - double(kPreempted);
  EXPECT_NEAR(double(scaled.incl_ticks), exact, 0.02 * exact);
  EXPECT_NEAR(double(scaled.excl_ticks), double(full.nodes[1].excl_ticks.load()), 0.02 * exact);
  // The stated error covers both: the preemption may be the machine's, not the routine's.
  EXPECT_LT(std::fabs(double(scaled.incl_ticks) - exact), 2 * scaled.se_ticks);
  EXPECT_LT(std::fabs(double(scaled.incl_ticks) - own), 2 * scaled.se_ticks);
  EXPECT_LT(scaled.se_ticks, 0.05 * exact);  // and says no more than that
  // An untimed call still charges its caller the path's mean, not the preempted call's share.
  EXPECT_LT(n.mean_ticks, 310u);
}

TEST(AdaptiveTiming, AFrequentSlowBranchIsTheRoutinesOwnAndScaled) {
  // 1 call in 100 takes 50x longer (a slow branch, not the machine): clipping those and counting
  // them once would report 0.8x the truth; as the routine's own tail they are scaled.
  ThreadState full(0, 1, 0, 16, 0), adaptive(0, 1, 0, 16, 0);
  make_adaptive(adaptive, 1);
  uint64_t clock = 0;
  for (int i = 0; i < 400000; ++i, clock += 20000) {
    uint64_t c = i % 100 == 7 ? 15000 : 300;
    call(full, 5, clock, clock + c);
    call(adaptive, 5, clock, clock + c);
  }
  NodeTimes scaled =
      node_times(adaptive.nodes[1], adaptive.nodes[1].calls.load(), outliers_of(adaptive, 1));
  double exact = double(full.nodes[1].incl_ticks.load());
  EXPECT_GT(scaled.outliers, scaled.timed / 200);
  EXPECT_NEAR(double(scaled.incl_ticks), exact, 0.05 * exact);
  EXPECT_LT(std::fabs(double(scaled.incl_ticks) - exact), 4 * scaled.se_ticks);
}

TEST(AdaptiveTiming, TheCallersExclusiveTimeStaysItsOwn) {
  ThreadState t(0, 1, 0, 16, 0);
  make_adaptive(t, 16);
  uint64_t clock = 0;
  RoutineId region = 1, dot = 2;
  // A region entered once, calling dot 100k times at 100 ticks each, 20 ticks apart.
  ASSERT_NE(open_frame<true>(&t, region, Nesting::kChildren), nullptr);
  begin_call(&t, [&] { return clock; });
  for (int i = 0; i < 100000; ++i) {
    call(t, dot, clock, clock + 100);
    clock += 120;
  }
  end_call(&t, nullptr, nullptr, [&] { return clock; });
  const Node& r = t.nodes[1];
  EXPECT_EQ(r.incl_ticks.load(), 12000000u);
  // Its own time is the 20-tick gaps: 2,000,000, whatever calls went untimed.
  EXPECT_NEAR(double(r.excl_ticks.load()), 2000000.0, 1.0);
  NodeTimes d = node_times(t.nodes[2], t.nodes[2].calls.load());
  EXPECT_EQ(d.incl_ticks, 10000000);
  EXPECT_EQ(d.se_ticks, 0.0);  // every call cost the same
}

TEST(AdaptiveTiming, LongOrCommunicationPathsStayTimedInFull) {
  ThreadState t(0, 1, 0, 16, 0);
  make_adaptive(t, 1);
  CallCost comm{};
  comm.comm.kind = CommKind::kCollective;
  uint64_t clock = 0;
  for (int i = 0; i < 30000; ++i) {
    EXPECT_EQ(call(t, 3, clock, clock + 5000), 2);       // 5 us: long
    EXPECT_EQ(call(t, 4, clock, clock + 10, &comm), 2);  // short, but comm_ops needs each
    clock += 6000;
  }
  EXPECT_EQ(t.nodes[1].timing, AdaptiveTiming::kFull);
  EXPECT_EQ(t.nodes[2].timing, AdaptiveTiming::kFull);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 30000u * 5000u);
}

TEST(AdaptiveTiming, AResumedGeneratorIsTimedInFull) {
  ThreadState t(0, 1, 0, 16, 0);
  make_adaptive(t, 1);
  uint64_t clock = 0;
  for (int i = 0; i < 30000; ++i, clock += 100) {
    // One call, then three resumes of it, as probe_enter and probe_resume open them.
    ThreadState* r = i % 4 == 0 ? open_frame<true>(&t, 9, Nesting::kChildren)
                                : open_frame<false>(&t, 9, Nesting::kChildren);
    ASSERT_NE(r, nullptr);
    EXPECT_FALSE(t.top().untimed);
    start_frame(&t, clock);
    end_call(&t, nullptr, nullptr, [&] { return clock + 10; });
  }
  EXPECT_EQ(t.nodes[1].timing, AdaptiveTiming::kFull);
  EXPECT_EQ(t.nodes[1].calls.load(), 7500u);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 300000u);
}

TEST(AdaptiveTiming, AnOpenUntimedFrameShowsNoTimeToTheFlusher) {
  ThreadState t(0, 1, 0, 16, 0);
  make_adaptive(t, 1024);
  uint64_t clock = 0;
  for (int i = 0; i < 10000; ++i, clock += 10) call(t, 7, clock, clock + 5);
  ASSERT_EQ(t.nodes[1].timing, AdaptiveTiming::kSampled);
  // Open calls until one is untimed, then snapshot with the frame open.
  for (;;) {
    ASSERT_NE(open_frame<true>(&t, 7, Nesting::kSuppress), nullptr);
    begin_call(&t, [&] { return clock; });
    if (t.top().untimed) break;
    end_call(&t, nullptr, nullptr, [&] { return clock + 5; });
    clock += 10;
  }
  Clock c;
  ThreadSnapshot s = take_snapshot(t, c, clock + 1000000);
  EXPECT_LT(s.nodes[1].incl_ns, 200000);  // no open-frame time from a start never read
  EXPECT_EQ(s.nodes[1].calls, t.nodes[1].calls.load());
  end_call(&t, nullptr, nullptr, [&] { return kMissed; });
  EXPECT_EQ(t.depth(), 0u);
}

TEST(AdaptiveTiming, RatesAreRoundedToPowersOfTwo) {
  EXPECT_EQ(make_adaptive_config(0, 1.0).mask, 0u);
  EXPECT_EQ(make_adaptive_config(1, 1.0).mask, 15u);
  EXPECT_EQ(make_adaptive_config(100, 1.0).mask, 63u);
  EXPECT_EQ(make_adaptive_config(2, 0.5).short_ticks, 2000u);
  EXPECT_NE(adaptive_seed(0, 0), 0u);
}

}  // namespace
}  // namespace sonde
