// The communication clock (comm_overlap): exposed, overlapped and in-flight time as the
// wrappers' calls begin and end, driven with made-up tick values (and the thread's real CPU
// time, which tells computing from waiting off the core between polls).
#include <gtest/gtest.h>

#include "core/thread_state.hpp"
#include "sonde/probe.hpp"

namespace sonde {
namespace {

// Spends `ns` of this thread's CPU time.
void burn_cpu(int64_t ns) {
  int64_t until = own_cpu_ns() + ns;
  volatile uint64_t x = 0;
  while (own_cpu_ns() < until) x = x + 1;
}

// A receive in flight, then polls that find nothing, 100 ticks apart: the loop between them is
// waiting, exposed (a red team's rank spinning on `while not req.Test()` for 0.9 s read 57 % of
// its communication overlapped). Work between two polls longer than kSpinGapTicks is
// computation, overlapping the receive, as before.
TEST(CommClock, TheLoopBetweenPollsThatFoundNothingIsExposed) {
  ThreadState t(0, 1, 0, 16, 0);
  comm_call_begin(&t, 0);
  comm_call_end(&t, 10, false, 1, 0);  // MPI_Irecv: one request in flight
  uint64_t at = 1000;                  // 990 ticks of computation: overlapped
  for (int i = 0; i < 3; ++i, at += 100) {
    comm_call_begin(&t, at);
    comm_call_end(&t, at + 20, true, 0, 0);  // MPI_Test, flag 0
    comm_call_polled(&t);
  }
  // Polls at 1000, 1100, 1200: each 20 exposed, the two gaps of 80 too.
  EXPECT_EQ(t.comm_clock.exposed.load(), 3u * 20 + 2 * 80);
  EXPECT_EQ(t.comm_clock.overlapped.load(), 990u);
  EXPECT_EQ(t.comm_clock.inflight_ticks.load(), 1220u - 10);
  // The last poll found nothing either, then the thread computed past the spin gap: its CPU
  // time grew by more than a spin's. (The gap a spin is judged by leaves out the ticks the
  // poll's read of the CPU clock took, real ones: past them too.)
  burn_cpu(20 * kSpinGapCpuNs);
  uint64_t later = 1220 + kSpinGapTicks + t.comm_clock.poll_read_ticks + 1;
  comm_call_begin(&t, later);
  comm_call_end(&t, later + 20, true, 0, 1);  // MPI_Wait
  EXPECT_EQ(t.comm_clock.exposed.load(), 3u * 20 + 2 * 80 + 20);
  EXPECT_EQ(t.comm_clock.overlapped.load(),
            990u + kSpinGapTicks + t.comm_clock.poll_read_ticks + 1);
  // A poll that found its request done leaves the next gap as it is: nothing in flight, no
  // call, nothing counted.
  comm_call_begin(&t, later + 100);
  comm_call_end(&t, later + 110, true, 0, 0);
  comm_call_begin(&t, later + 150);
  EXPECT_EQ(t.comm_clock.exposed.load(), 3u * 20 + 2 * 80 + 20 + 10);
}

// A gap past the spin's where the thread spent no CPU time (taken off its core on a loaded
// host, or asleep between its polls) is waiting: a CI run's spinning rank read 0.149 s of its
// 0.6 s of waiting overlapped.
TEST(CommClock, AGapOffTheCoreBetweenPollsIsExposed) {
  ThreadState t(0, 1, 0, 16, 0);
  comm_call_begin(&t, 0);
  comm_call_end(&t, 10, false, 1, 0);  // MPI_Irecv
  comm_call_begin(&t, 100);
  comm_call_end(&t, 120, true, 0, 0);  // MPI_Test, flag 0
  comm_call_polled(&t);
  uint64_t gap = 100 * kSpinGapTicks + t.comm_clock.poll_read_ticks;  // no CPU time spent
  comm_call_begin(&t, 120 + gap);
  EXPECT_EQ(t.comm_clock.exposed.load(), 20u + gap);
  EXPECT_EQ(t.comm_clock.overlapped.load(), 90u);
}

}  // namespace
}  // namespace sonde
