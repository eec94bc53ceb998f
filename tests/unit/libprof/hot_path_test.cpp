// The hot path's own rules, run through the same frame steps probe_enter/probe_exit use
// (core/frame_ops.hpp), with chosen ticks: suppression of nested interposed calls, the depth
// limit, exclusive time under children, and trace events.
#include <gtest/gtest.h>

#include "core/frame_ops.hpp"
#include "frames.hpp"

namespace sonde {
namespace {

using test::enter_at;
using test::leave_at;

TEST(HotPath, ASuppressingFrameHidesCallsMadeInsideIt) {
  ThreadState t(0, 1, 0, 16, 0);
  enter_at(t, 5, 100, Nesting::kSuppress);  // cblas_sgemm
  // sgemm_ reached inside the BLAS: not measured, no node, no call counted.
  EXPECT_EQ(open_frame<true>(&t, 6, Nesting::kSuppress), nullptr);
  EXPECT_EQ(t.nodes.size_acquire(), 2u);
  leave_at(t, 300);
  // Outside it again, the next call is measured.
  EXPECT_NE(open_frame<true>(&t, 6, Nesting::kSuppress), nullptr);
  start_frame(&t, 400);
  leave_at(t, 450);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 200u);
  EXPECT_EQ(t.nodes[2].calls.load(), 1u);
}

TEST(HotPath, TheWindowsBitHoldsCallsBackUntilTheWindowOpens) {
  CollectionWindow window;
  window.init({0, 2, "step", 0}, 0, 0);  // opens at the 3rd "step"
  ThreadState t(0, 1, 0, 16, 0);
  t.window = &window;
  t.suppress |= ThreadState::kWindowClosed;
  EXPECT_EQ(open_frame<true>(&t, 6, Nesting::kSuppress), nullptr);
  EXPECT_FALSE(window.region_begins("step"));
  EXPECT_FALSE(window.region_begins("other"));
  EXPECT_FALSE(window.region_begins("step"));
  EXPECT_EQ(t.nodes.size_acquire(), 1u);  // nothing measured, no node made
  EXPECT_TRUE(window.region_begins("step"));
  // Open: the thread's next call drops the bit and is measured.
  enter_at(t, 6, 100, Nesting::kSuppress);
  EXPECT_EQ(t.suppress, 1u);
  EXPECT_EQ(open_frame<true>(&t, 7, Nesting::kSuppress), nullptr);  // suppressed as ever
  leave_at(t, 150);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.nodes[1].calls.load(), 1u);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 50u);
  EXPECT_EQ(window.steps_seen(), 3u);
  EXPECT_NE(window.opened_mono_ns(), 0);
}

TEST(HotPath, RegionsNestTheirChildrenAndChargeExclusiveTime) {
  ThreadState t(0, 1, 0, 16, 0);
  uint32_t region = enter_at(t, 1, 0);
  uint32_t gemm = enter_at(t, 2, 10, Nesting::kSuppress);
  leave_at(t, 70);
  leave_at(t, 100);
  EXPECT_EQ(t.nodes[region].incl_ticks.load(), 100u);
  EXPECT_EQ(t.nodes[region].excl_ticks.load(), 40u);
  EXPECT_EQ(t.nodes[gemm].incl_ticks.load(), 60u);
  EXPECT_EQ(t.nodes[region].subrs.load(), 1u);
}

// Two greenlets on one thread: each switch sets the running one's frames aside and puts the
// other's back, so every frame is charged only the time its own stack ran, and each call
// counts once however often its stack was switched out.
TEST(HotPath, SuspendedStacksChargeOnlyTheTimeTheyRan) {
  ThreadState t(0, 1, 0, 16, 0);
  uint32_t main_body = enter_at(t, 1, 0);
  SuspendedFrame main_saved[4], other_saved[4];
  ASSERT_EQ(suspend_stack(&t, main_saved, 100), 1u);  // main switches to the other greenlet
  EXPECT_EQ(t.depth(), 0u);
  uint32_t run = enter_at(t, 2, 100);
  uint32_t work = enter_at(t, 3, 110);
  ASSERT_EQ(suspend_stack(&t, other_saved, 200), 2u);  // and back
  EXPECT_EQ(other_saved[0].node, run);
  EXPECT_EQ(other_saved[1].node, work);
  resume_stack(&t, main_saved, 1, 200);
  EXPECT_EQ(t.top().node.load(), main_body);
  ASSERT_EQ(suspend_stack(&t, main_saved, 250), 1u);  // main runs 50, then switches again
  resume_stack(&t, other_saved, 2, 250);
  leave_at(t, 300);  // work returns
  leave_at(t, 310);  // run returns: the greenlet ends
  resume_stack(&t, main_saved, 1, 310);
  leave_at(t, 400);
  EXPECT_EQ(t.depth(), 0u);
  EXPECT_EQ(t.nodes[main_body].calls.load(), 1u);
  EXPECT_EQ(t.nodes[run].calls.load(), 1u);
  EXPECT_EQ(t.nodes[work].calls.load(), 1u);
  // main: 0-100, 200-250, 310-400; the greenlet: 100-200, 250-310.
  EXPECT_EQ(t.nodes[main_body].incl_ticks.load(), 240u);
  EXPECT_EQ(t.nodes[main_body].excl_ticks.load(), 240u);
  EXPECT_EQ(t.nodes[run].incl_ticks.load(), 160u);
  EXPECT_EQ(t.nodes[work].incl_ticks.load(), 90 + 50u);
  EXPECT_EQ(t.nodes[run].excl_ticks.load(), 20u);
  // Only the greenlet's outermost frame is the root's child: 240 + 160 of 400.
  EXPECT_EQ(t.stack_[0].child_ticks.load(), 400u);
}

TEST(HotPath, ASuspendedSuppressingFrameSuppressesAgainWhenResumed) {
  ThreadState t(0, 1, 0, 16, 0);
  enter_at(t, 5, 0, Nesting::kSuppress);
  SuspendedFrame saved[2];
  ASSERT_EQ(suspend_stack(&t, saved, 10), 1u);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_NE(open_frame<true>(&t, 6, Nesting::kChildren), nullptr);  // the other stack's call
  start_frame(&t, 10);
  leave_at(t, 20);
  resume_stack(&t, saved, 1, 20);
  EXPECT_EQ(t.suppress, 1u);
  EXPECT_EQ(open_frame<true>(&t, 6, Nesting::kChildren), nullptr);
  leave_at(t, 30);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 20u);
  EXPECT_EQ(t.nodes[1].calls.load(), 1u);
}

TEST(HotPath, FramesOfAnotherThreadOrPastTheDepthLimitAreNotResumed) {
  ThreadState t(0, 1, 0, 2, 0);
  SuspendedFrame foreign[1] = {{999, Nesting::kChildren}};
  resume_stack(&t, foreign, 1, 0);
  EXPECT_EQ(t.depth(), 0u);
  enter_at(t, 1, 0);
  enter_at(t, 2, 0);
  SuspendedFrame saved[2];
  ASSERT_EQ(suspend_stack(&t, saved, 5), 2u);
  enter_at(t, 3, 5);  // the other stack's frame, still open at the switch back
  resume_stack(&t, saved, 2, 6);
  EXPECT_EQ(t.depth(), 2u);  // one of the two fits
  leave_at(t, 7);
  leave_at(t, 7);
  leave_at(t, 7);  // its close finds nothing to close
  EXPECT_EQ(t.depth(), 0u);
}

TEST(HotPath, CallsPastTheDepthLimitAreCountedAndNotMeasured) {
  ThreadState t(0, 1, 0, 2, 0);
  enter_at(t, 1, 0);
  enter_at(t, 2, 1);
  EXPECT_EQ(open_frame<true>(&t, 3, Nesting::kChildren), nullptr);
  EXPECT_EQ(t.depth_overflows.load(), 1u);
  EXPECT_EQ(t.depth(), 2u);
  leave_at(t, 5);
  leave_at(t, 9);
  EXPECT_EQ(t.depth(), 0u);
}

TEST(HotPath, ACancelledCallIsNeitherCountedNorCharged) {
  ThreadState t(0, 1, 0, 16, 0);
  enter_at(t, 5, 100, Nesting::kChildren);  // r()
  enter_at(t, 5, 200, Nesting::kChildren);  // r() again, refused by the recursion check
  cancel_frame(&t);
  leave_at(t, 300);
  EXPECT_EQ(t.depth(), 0u);
  EXPECT_EQ(t.nodes[1].calls.load(), 1u);
  EXPECT_EQ(t.nodes[1].subrs.load(), 0u);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 200u);
  EXPECT_EQ(t.nodes[1].excl_ticks.load(), 200u);  // the refused call's moment stays the caller's
  EXPECT_EQ(t.nodes[2].calls.load(), 0u);
  EXPECT_EQ(t.nodes[2].incl_ticks.load(), 0u);
  cancel_frame(&t);  // nothing open: nothing changes
  EXPECT_EQ(t.depth(), 0u);
}

TEST(HotPath, AnUnbalancedExitChangesNothing) {
  ThreadState t(0, 1, 0, 4, 0);
  leave_at(t, 50);
  EXPECT_EQ(t.depth(), 0u);
  EXPECT_EQ(t.nodes[0].incl_ticks.load(), 0u);
}

TEST(HotPath, TraceModeRecordsEachCallWithItsTicks) {
  ThreadState t(0, 1, 0, 8, 4);
  uint32_t a = enter_at(t, 1, 10);
  leave_at(t, 25);
  uint32_t b = enter_at(t, 2, 30);
  leave_at(t, 31);
  std::vector<TraceEvent> seen;
  t.trace->drain([&](const TraceEvent& e) { seen.push_back(e); });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].node, a);
  EXPECT_EQ(seen[0].start, 10u);
  EXPECT_EQ(seen[0].end, 25u);
  EXPECT_EQ(seen[1].node, b);
  EXPECT_EQ(seen[1].end, 31u);
}

TEST(HotPath, CostModelFiguresAndShapesAreChargedOnExit) {
  ThreadState t(0, 1, 0, 8, 0);
  uint32_t n = enter_at(t, 1, 0, Nesting::kSuppress);
  CallCost cost{2 * 8 * 8 * 8, 3 * 8 * 8 * 4, GemmShape{8, 8, 8, 1, 'N', 'N', DType::kF32}, {}};
  leave_at(t, 64, &cost, reinterpret_cast<const void*>(0x1000));
  EXPECT_EQ(t.nodes[n].flops.load(), 1024u);
  EXPECT_EQ(t.nodes[n].bytes.load(), 768u);
}

}  // namespace
}  // namespace sonde
