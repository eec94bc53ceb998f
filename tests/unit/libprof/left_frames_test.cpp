// Calls a longjmp left (issue 37): a signal handler that siglongjmps out of a wrapper, wherever
// the signal came in it, leaves the shadow stack in a state the thread's next wrapper call
// repairs. Driven through the hot path's own steps with chosen stack addresses: `cfa` is a
// wrapper's caller's stack address, `sp` the wrapper's own stack pointer (wrappers/intercept.hpp).
#include <gtest/gtest.h>
#include <signal.h>

#include <vector>

#include "core/frame_ops.hpp"
#include "frames.hpp"
#include "sonde/probe.hpp"

namespace sonde {
namespace {

using test::enter_at;
using test::leave_at;

// ddot, called from 0x7000, its wrapper's frame down to 0x6f00; dgemm called after the jump by
// the same caller, 8 stack arguments lower.
constexpr uintptr_t kCaller = 0x7000, kWrapper = 0x6f00, kAfter = kCaller - 64;
constexpr uintptr_t kOtherStack = uintptr_t(1) << 31;  // a fiber's stack, 2 GiB away

ThreadState* open_ddot(ThreadState& t) {
  return open_frame<true>(&t, 2, Nesting::kSuppress, kCaller, kWrapper);
}

// A native call left by a longjmp: the next wrapper call at the same stack address (or above)
// takes it off the stack, counted and uncharged (its time stays its caller's), and the thread's
// calls are measured again; a call below it (made inside it) is nested as ever.
TEST(LeftFrames, ACallLeftByALongjmpIsTakenOffByTheNextCallAboveIt) {
  ThreadState t(0, 1, 0, 16, 0);
  uint32_t region = enter_at(t, 1, 0);
  ASSERT_NE(open_ddot(t), nullptr);
  start_frame(&t, 10);
  // A call made inside it: its caller lies below the wrapper (nested, suppressed as ever).
  EXPECT_EQ(open_frame<true>(&t, 3, Nesting::kSuppress, 0x6e00, 0x6d00), nullptr);
  EXPECT_EQ(t.abandoned.load(), 0u);
  ASSERT_NE(open_frame<true>(&t, 4, Nesting::kSuppress, kAfter, 0x6e00), nullptr);
  start_frame(&t, 50);
  leave_at(t, 60);
  EXPECT_EQ(t.abandoned.load(), 1u);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.depth(), 1u);
  leave_at(t, 100);
  EXPECT_EQ(t.nodes[2].calls.load(), 1u);
  EXPECT_EQ(t.nodes[2].incl_ticks.load(), 0u);        // the abandoned call is charged nothing
  EXPECT_EQ(t.nodes[region].excl_ticks.load(), 90u);  // its time is its caller's
  // A frame of another stack (a fiber's, 1 GiB or more away) is not judged.
  ASSERT_NE(open_ddot(t), nullptr);
  start_frame(&t, 200);
  EXPECT_EQ(open_frame<true>(&t, 4, Nesting::kSuppress, kCaller + kOtherStack, 0x6000), nullptr);
  EXPECT_EQ(t.abandoned.load(), 1u);
}

// The jump came after open_frame raised the suppress flag and before start_frame put the frame
// on the stack (a fault in the cost model, a timer during the clock read): the flag stayed up
// with no frame to lower it, and every later call of the thread was refused as BLAS inside BLAS.
TEST(LeftFrames, ACallLeftBeforeItsClockStartedIsTakenOffByTheNextCallAboveIt) {
  ThreadState t(0, 1, 0, 16, 0);
  uint32_t region = enter_at(t, 1, 0);
  ASSERT_NE(open_ddot(t), nullptr);
  EXPECT_EQ(t.depth(), 1u);
  EXPECT_EQ(t.suppress, 1u);
  ASSERT_NE(open_frame<true>(&t, 4, Nesting::kSuppress, kAfter, 0x6e00), nullptr);
  start_frame(&t, 50);
  leave_at(t, 60);
  EXPECT_EQ(t.abandoned.load(), 1u);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.depth(), 1u);
  leave_at(t, 100);
  EXPECT_EQ(t.nodes[2].calls.load(), 1u);  // it was called: counted, charged nothing
  EXPECT_EQ(t.nodes[2].incl_ticks.load(), 0u);
  EXPECT_EQ(t.nodes[3].calls.load(), 1u);
  EXPECT_EQ(t.nodes[3].incl_ticks.load(), 10u);
  EXPECT_EQ(t.nodes[region].excl_ticks.load(), 90u);
}

// A handler that interrupted the same moment and calls BLAS itself: its call lies below the
// wrapper (nested), or on another stack, and is refused as BLAS inside BLAS; when the handler
// returns, the interrupted call goes on and is measured whole.
TEST(LeftFrames, ACallInterruptedBeforeItsClockStartedGoesOnWhenTheHandlerReturns) {
  ThreadState t(0, 1, 0, 16, 0);
  ASSERT_NE(open_ddot(t), nullptr);
  EXPECT_EQ(open_frame<true>(&t, 3, Nesting::kSuppress, 0x6e00, 0x6d00), nullptr);
  EXPECT_EQ(open_frame<true>(&t, 3, Nesting::kSuppress, kCaller + kOtherStack, 0x6000), nullptr);
  EXPECT_EQ(t.abandoned.load(), 0u);
  start_frame(&t, 10);
  leave_at(t, 30);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.depth(), 0u);
  EXPECT_EQ(t.nodes[1].calls.load(), 1u);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 20u);
  EXPECT_EQ(t.nodes.size_acquire(), 2u);  // the refused calls made no node
}

// A handler on a sigaltstack: its stack may lie anywhere, above the interrupted wrapper too,
// so nothing is judged from it (a real alternate stack, a real signal).
ThreadState* g_state;
ThreadState* g_opened;
uintptr_t g_handler_cfa;

void call_blas_from_the_handler(int) {
  g_opened = open_frame<true>(g_state, 3, Nesting::kSuppress, g_handler_cfa, g_handler_cfa - 256);
}

TEST(LeftFrames, ACallFromASigaltstackHandlerTakesNothingOff) {
  ThreadState t(0, 1, 0, 16, 0);
  ASSERT_NE(open_ddot(t), nullptr);
  std::vector<char> alt(1 << 16);
  stack_t ss{}, old{};
  ss.ss_sp = alt.data();
  ss.ss_size = alt.size();
  ASSERT_EQ(sigaltstack(&ss, &old), 0);
  struct sigaction sa = {}, before = {};
  sa.sa_handler = call_blas_from_the_handler;
  sa.sa_flags = SA_ONSTACK;
  ASSERT_EQ(sigaction(SIGUSR1, &sa, &before), 0);
  g_state = &t;
  g_opened = &t;
  g_handler_cfa = kCaller + 0x1000;  // above the wrapper, as an alternate stack may be
  raise(SIGUSR1);
  sigaction(SIGUSR1, &before, nullptr);
  sigaltstack(&old, nullptr);
  EXPECT_EQ(g_opened, nullptr);
  EXPECT_EQ(t.abandoned.load(), 0u);
  EXPECT_EQ(t.suppress, 1u);
  start_frame(&t, 10);
  leave_at(t, 30);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.nodes[1].incl_ticks.load(), 20u);
}

// A jump out of two native calls, the inner one not yet started (cuBLAS, which lets calls
// inside it be measured, and a BLAS call made inside it): both come off, the flag comes down.
TEST(LeftFrames, AJumpOutOfTwoCallsTakesOffTheOpenOneAndTheUnstartedOneAboveIt) {
  ThreadState t(0, 1, 0, 16, 0);
  ASSERT_NE(open_frame<true>(&t, 5, Nesting::kChildren, kCaller, kWrapper), nullptr);
  start_frame(&t, 10);
  ASSERT_NE(open_frame<true>(&t, 2, Nesting::kSuppress, 0x6e80, 0x6e00), nullptr);
  ASSERT_NE(open_frame<true>(&t, 4, Nesting::kSuppress, kAfter, 0x6e00), nullptr);
  start_frame(&t, 50);
  leave_at(t, 60);
  EXPECT_EQ(t.abandoned.load(), 2u);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.depth(), 0u);
}

// The jump came while the call's frame closed, after close_frame lowered the flag and before it
// took the frame off: the next call above takes the frame off and leaves the flag down (it was
// lowered a second time, to 2^32 - 1, which refused every later call of the thread).
TEST(LeftFrames, ACallLeftWhileItsFrameClosedLowersTheFlagOnce) {
  ThreadState t(0, 1, 0, 16, 0);
  ASSERT_NE(open_ddot(t), nullptr);
  start_frame(&t, 10);
  t.suppress -= 1;  // close_frame's step before the jump
  ASSERT_NE(open_frame<true>(&t, 4, Nesting::kSuppress, kAfter, 0x6e00), nullptr);
  start_frame(&t, 50);
  leave_at(t, 60);
  EXPECT_EQ(t.abandoned.load(), 1u);
  EXPECT_EQ(t.suppress, 0u);
  EXPECT_EQ(t.depth(), 0u);
  ASSERT_NE(open_ddot(t), nullptr);  // and the next
}

// An MPI call left by a jump never reached comm_call_end: the thread's communication clock
// stayed in a call, and no later call's exposed time was counted (nor any overlap). A call that
// begins where the left one's frame was is not inside it; one made inside a call still is.
TEST(LeftFrames, ACommCallLeftByALongjmpLeavesTheThreadOutOfCommunication) {
  ThreadState t(0, 1, 0, 16, 0);
  enter_at(t, 1, 0);
  ASSERT_NE(open_ddot(t), nullptr);
  comm_call_begin(&t, 10);
  start_frame(&t, 10);
  // The jump: nothing closes. The next call, from the same caller, takes the frame off.
  ASSERT_NE(open_frame<true>(&t, 4, Nesting::kSuppress, kAfter, 0x6e00), nullptr);
  comm_call_begin(&t, 50);
  start_frame(&t, 50);
  leave_at(t, 60);
  comm_call_end(&t, 60, true, 0, 0);
  EXPECT_EQ(t.abandoned.load(), 1u);
  EXPECT_EQ(t.comm_clock.in_call, 0);
  EXPECT_EQ(t.comm_clock.exposed.load(), 10u);  // before: 0, the clock still in the left call
  // A communication call made inside another (a torch collective's MPI call) is nested.
  ASSERT_NE(open_frame<true>(&t, 5, Nesting::kChildren), nullptr);
  comm_call_begin(&t, 100);
  start_frame(&t, 100);
  ASSERT_NE(open_frame<true>(&t, 6, Nesting::kSuppress, 0x6e00, 0x6d00), nullptr);
  comm_call_begin(&t, 110);
  start_frame(&t, 110);
  leave_at(t, 120);
  comm_call_end(&t, 120, true, 0, 0);
  EXPECT_EQ(t.comm_clock.in_call, 1);
  leave_at(t, 140);
  comm_call_end(&t, 140, true, 0, 0);
  EXPECT_EQ(t.comm_clock.exposed.load(), 50u);  // the outer call's 40 alone
}

// torch's backend work completes outside the thread's calls, seen at its next operator, which
// may run inside a call of the thread's own (a Work.wait): the completion ends operations, not
// that call, whose exposed time stays counted.
TEST(LeftFrames, ACompletionInsideACallLeavesTheCallOpen) {
  ThreadState t(0, 1, 0, 16, 0);
  comm_call_begin(&t, 10);
  comm_call_end(&t, 20, false, 1, 0);  // a nonblocking post: one operation in flight
  comm_call_begin(&t, 30);             // a wait
  comm_completed(&t, 35, 1);
  EXPECT_EQ(t.comm_clock.in_call, 1);
  EXPECT_EQ(t.comm_clock.inflight, 0);
  comm_call_end(&t, 50, true, 0, 0);
  EXPECT_EQ(t.comm_clock.exposed.load(), 20u);         // the wait's 20 (before: 0, the call ended)
  EXPECT_EQ(t.comm_clock.inflight_ticks.load(), 15u);  // 20 to 35
  EXPECT_EQ(t.comm_clock.overlapped.load(), 10u);      // 20 to 30, outside any call
}

}  // namespace
}  // namespace sonde
