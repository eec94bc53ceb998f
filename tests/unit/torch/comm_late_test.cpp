// libprof's side of the pairing: bytes told after a c10d call's frame closed land on that
// call's node, as a CommCost at probe_exit would have put them.
#include <gtest/gtest.h>

#include "../libprof/frames.hpp"
#include "core/frame_ops.hpp"
#include "sonde/probe.hpp"

namespace sonde {
namespace {

TEST(TorchCommLate, BytesToldLaterLandOnTheClosedCallsNode) {
  ThreadState t(0, 1, 0, 16, 0);
  test::enter_at(t, 1, 0);                   // the Python frame
  uint32_t call = test::enter_at(t, 2, 10);  // c10d::allreduce_
  EXPECT_EQ(probe_current_node(&t), call);
  test::leave_at(t, 20);
  test::enter_at(t, 2, 30);  // the same call again, on the same node
  test::leave_at(t, 42);
  test::leave_at(t, 50);
  CommCost comm{CommKind::kCollective, false, 2};
  comm_record_late(&t, call, comm, 9640, 10);
  comm_record_late(&t, call, comm, 9640, 12);
  ASSERT_EQ(t.comms.size_acquire(), 1u);
  const CommRecord& r = t.comms[0];
  EXPECT_EQ(r.node, call);
  EXPECT_EQ(r.bytes, 9640u);
  EXPECT_EQ(r.comm.comm_size, 2);
  EXPECT_FALSE(r.comm.blocking);
  EXPECT_EQ(r.calls.load(), 2u);
  EXPECT_EQ(r.ticks.load(), 22u);
  EXPECT_EQ(t.nodes[call].bytes.load(), 2 * 9640u);
  EXPECT_EQ(t.nodes[call].calls.load(), 2u);
}

}  // namespace
}  // namespace sonde
