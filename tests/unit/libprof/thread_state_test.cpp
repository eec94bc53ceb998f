#include "core/thread_state.hpp"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <set>
#include <thread>
#include <vector>

#include "frames.hpp"

namespace sonde {
namespace {

using test::enter_at;
using test::leave_at;

ThreadState make_state(uint64_t start = 1000) { return ThreadState(0, 1234, start, 16, 0); }

GemmShape shape(int64_t m, int64_t n, int64_t k, char ta = 'N', char tb = 'N',
                DType t = DType::kF32) {
  return GemmShape{m, n, k, 1, ta, tb, t};
}

const void* site(uintptr_t v) { return reinterpret_cast<const void*>(v); }

// Spins until the calling thread has used `ns` more of its CPU.
void spin_cpu(int64_t ns) {
  int64_t until = own_cpu_ns() + ns;
  volatile double x = 0;
  while (own_cpu_ns() < until) x = x + 1.0;
}

TEST(ThreadState, CountsItsThreadsCpuTimeFromItsStartToItsEnd) {
  int64_t spent = own_cpu_ns();
  spin_cpu(20'000'000);
  // Registered now: the 20 ms before are not its.
  ThreadState t(0, pid_t(syscall(SYS_gettid)), 1000, 8, 0);
  spin_cpu(30'000'000);
  int64_t running = t.cpu_ns();
  EXPECT_GE(running, 30'000'000);
  EXPECT_LT(running, own_cpu_ns() - spent - 19'000'000);
  // Read by the thread's id from another thread too (the flusher's way).
  int64_t seen = -1;
  std::thread([&] { seen = t.cpu_ns(); }).join();
  EXPECT_GE(seen, running);
  // Ended: the figure stays what it was at the end.
  t.mark_ended(2000);
  int64_t ended = t.cpu_ns();
  spin_cpu(10'000'000);
  EXPECT_EQ(t.cpu_ns(), ended);
  EXPECT_GE(ended, running);
}

TEST(ThreadState, HasNoCpuTimeForAThreadItCannotRead) {
  ThreadState t(0, 1, 1000, 8, 0);  // pid 1 is no thread of this process
  EXPECT_EQ(t.cpu_ns(), -1);
}

TEST(ThreadState, StartsWithTheRootNodeOpen) {
  ThreadState t(3, 77, 500, 8, 0);
  EXPECT_EQ(t.seq(), 3u);
  EXPECT_EQ(t.tid(), 77);
  EXPECT_EQ(t.start_ticks(), 500u);
  EXPECT_EQ(t.depth(), 0u);
  ASSERT_EQ(t.nodes.size_acquire(), 1u);
  EXPECT_EQ(t.nodes[0].routine, 0u);
  EXPECT_EQ(t.nodes[0].calls.load(), 1u);
  EXPECT_EQ(t.stack_[0].node.load(), 0u);
  EXPECT_EQ(t.stack_[0].start.load(), 500u);
  EXPECT_EQ(t.trace, nullptr);
  EXPECT_NE(ThreadState(0, 1, 0, 8, 16).trace, nullptr);
}

TEST(ThreadState, ChildOfReturnsOneNodePerParentAndRoutine) {
  ThreadState t = make_state();
  uint32_t a = t.child_of(0, 5);
  uint32_t b = t.child_of(0, 6);
  EXPECT_NE(a, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(t.child_of(0, 5), a);
  EXPECT_EQ(t.child_of(0, 6), b);
  EXPECT_EQ(t.nodes.size_acquire(), 3u);
  // The same routine under another parent is another call path.
  uint32_t aa = t.child_of(a, 5);
  EXPECT_NE(aa, a);
  EXPECT_EQ(t.nodes[aa].parent, a);
  EXPECT_EQ(t.nodes[aa].routine, 5u);
  EXPECT_EQ(t.nodes[aa].depth, 2u);
  EXPECT_EQ(t.nodes[a].parent, 0u);
  EXPECT_EQ(t.nodes[a].depth, 1u);
  EXPECT_EQ(t.child_of(a, 5), aa);
}

TEST(ThreadState, LookupsStayCorrectInAnyOrder) {
  ThreadState t = make_state();
  std::vector<uint32_t> ids;
  for (RoutineId r = 1; r <= 6; ++r) ids.push_back(t.child_of(0, r));
  EXPECT_EQ(std::set<uint32_t>(ids.begin(), ids.end()).size(), 6u);
  // An order that makes every child the hot one at some point, and misses it in between.
  for (int round = 0; round < 3; ++round) {
    for (RoutineId r : {1u, 4u, 1u, 6u, 2u, 3u, 5u, 5u, 2u}) {
      ASSERT_EQ(t.child_of(0, r), ids[r - 1]) << "routine " << r << " round " << round;
    }
  }
  EXPECT_EQ(t.child_of(0, 1), ids[0]);
  EXPECT_EQ(t.nodes[0].hot_child, ids[0]);  // the last one looked up is the hot one
  EXPECT_EQ(t.nodes[0].hot_routine, 1u);    // ... with its routine beside it
  EXPECT_EQ(t.nodes.size_acquire(), 7u);    // no duplicate was created on the way
}

TEST(ThreadState, ManyChildrenOfOneParentAndGrandchildrenStayDistinct) {
  ThreadState t = make_state();
  // Past several index resizes; the same routine under different parents is a different node.
  std::vector<uint32_t> first, second;
  for (RoutineId r = 1; r <= 5000; ++r) first.push_back(t.child_of(0, r));
  for (RoutineId r = 1; r <= 5000; ++r) second.push_back(t.child_of(first[0], r));
  for (RoutineId r = 5000; r >= 1; --r) {
    ASSERT_EQ(t.child_of(0, r), first[r - 1]);
    ASSERT_EQ(t.child_of(first[0], r), second[r - 1]);
    ASSERT_EQ(t.nodes[second[r - 1]].parent, first[0]);
  }
  EXPECT_EQ(t.nodes.size_acquire(), 10001u);
}

TEST(ThreadState, RecordShapeAggregatesIdenticalShapes) {
  ThreadState t = make_state();
  uint32_t n = t.child_of(0, 1);
  t.record_shape(n, site(0x1000), shape(64, 32, 16), 100, 2000, 300);
  t.record_shape(n, site(0x1000), shape(64, 32, 16), 50, 2000, 300);
  ASSERT_EQ(t.shapes.size_acquire(), 1u);
  const ShapeRecord& r = t.shapes[0];
  EXPECT_EQ(r.node, n);
  EXPECT_EQ(r.site, site(0x1000));
  EXPECT_EQ(r.shape.m, 64);
  EXPECT_EQ(r.calls.load(), 2u);
  EXPECT_EQ(r.ticks.load(), 150u);
  EXPECT_EQ(r.flops.load(), 4000u);
  EXPECT_EQ(r.bytes.load(), 600u);
}

TEST(ThreadState, RecordShapeSeparatesSitesNodesAndShapes) {
  ThreadState t = make_state();
  uint32_t n1 = t.child_of(0, 1), n2 = t.child_of(0, 2);
  t.record_shape(n1, site(0x1000), shape(64, 32, 16), 1, 1, 1);
  t.record_shape(n1, site(0x2000), shape(64, 32, 16), 1, 1, 1);            // another call site
  t.record_shape(n2, site(0x1000), shape(64, 32, 16), 1, 1, 1);            // another node
  t.record_shape(n1, site(0x1000), shape(64, 32, 17), 1, 1, 1);            // another k
  t.record_shape(n1, site(0x1000), shape(64, 32, 16, 'T'), 1, 1, 1);       // transposed A
  t.record_shape(n1, site(0x1000), shape(64, 32, 16, 'N', 'C'), 1, 1, 1);  // conj B
  t.record_shape(n1, site(0x1000), shape(64, 32, 16, 'N', 'N', DType::kF64), 1, 1, 1);
  GemmShape batched = shape(64, 32, 16);
  batched.batch = 8;
  t.record_shape(n1, site(0x1000), batched, 1, 1, 1);
  ASSERT_EQ(t.shapes.size_acquire(), 8u);
  for (uint32_t i = 0; i < 8; ++i) EXPECT_EQ(t.shapes[i].calls.load(), 1u) << i;
  // Repeating each one lands on its own record.
  t.record_shape(n1, site(0x2000), shape(64, 32, 16), 1, 1, 1);
  t.record_shape(n1, site(0x1000), batched, 1, 1, 1);
  EXPECT_EQ(t.shapes.size_acquire(), 8u);
  EXPECT_EQ(t.shapes[1].calls.load(), 2u);
  EXPECT_EQ(t.shapes[7].calls.load(), 2u);
  EXPECT_EQ(t.shapes[0].calls.load(), 1u);
}

TEST(ThreadState, ShapeIndexGrowthKeepsEveryRecordFindable) {
  ThreadState t = make_state();
  uint32_t n = t.child_of(0, 1);
  constexpr int kShapes = 300;  // the index starts at 64 slots and doubles several times
  for (int i = 0; i < kShapes; ++i) {
    t.record_shape(n, site(0x1000 + (i % 3)), shape(i, 2 * i, 7), uint64_t(i), 1, 1);
  }
  ASSERT_EQ(t.shapes.size_acquire(), uint32_t(kShapes));
  for (int i = 0; i < kShapes; ++i) {
    t.record_shape(n, site(0x1000 + (i % 3)), shape(i, 2 * i, 7), 1, 1, 1);
  }
  EXPECT_EQ(t.shapes.size_acquire(), uint32_t(kShapes));
  for (int i = 0; i < kShapes; ++i) {
    const ShapeRecord& r = t.shapes[uint32_t(i)];
    EXPECT_EQ(r.shape.m, i);
    EXPECT_EQ(r.calls.load(), 2u) << i;
    EXPECT_EQ(r.ticks.load(), uint64_t(i) + 1) << i;
  }
}

TEST(ThreadState, ResetCountsZeroesMeasurementsAndKeepsOpenFrames) {
  ThreadState t = make_state(1000);
  uint32_t a = enter_at(t, 1, 1100);
  uint32_t b = enter_at(t, 2, 1200);
  CallCost cost{10, 20, shape(2, 2, 2), {}};
  leave_at(t, 1300, &cost, site(0x10));
  EXPECT_EQ(t.nodes[b].calls.load(), 1u);
  uint32_t c = enter_at(t, 3, 1400);  // a -> c stays open
  bump(t.depth_overflows, 2);
  bump(t.region_mismatches, 1);
  t.mark_ended(1500);

  uint32_t nodes_before = t.nodes.size_owner();
  uint32_t ref_b = t.node_ref(b), ref_c = t.node_ref(c);
  EXPECT_EQ(t.node_of_ref(ref_b), b);
  t.reset_counts(5000);
  EXPECT_EQ(t.depth(), 2u);
  EXPECT_EQ(t.start_ticks(), 5000u);
  EXPECT_EQ(t.end_ticks(), 0u);
  EXPECT_EQ(t.depth_overflows.load(), 0u);
  EXPECT_EQ(t.region_mismatches.load(), 0u);
  // Closed work is forgotten: the tree holds the open frames' path alone (root, 1, 3), and
  // the shapes none.
  EXPECT_EQ(nodes_before, 4u);
  ASSERT_EQ(t.nodes.size_owner(), 3u);
  EXPECT_EQ(t.shapes.size_owner(), 0u);
  uint32_t a2 = t.stack_[1].node.load(), c2 = t.stack_[2].node.load();
  EXPECT_EQ(t.nodes[a2].routine, 1u);
  EXPECT_EQ(t.nodes[a2].parent, 0u);
  EXPECT_EQ(t.nodes[a2].depth, 1u);
  EXPECT_EQ(t.nodes[c2].routine, 3u);
  EXPECT_EQ(t.nodes[c2].parent, a2);
  EXPECT_EQ(t.nodes[c2].depth, 2u);
  // ...open frames stay, timed from `now`, with no call of the child's: the parent made them.
  // The thread's root counts one, as every thread's does.
  EXPECT_EQ(t.nodes[0].calls.load(), 1u);
  for (uint32_t n : {0u, a2, c2}) {
    EXPECT_EQ(t.nodes[n].subrs.load(), 0u) << n;
    EXPECT_EQ(t.nodes[n].incl_ticks.load(), 0u) << n;
    EXPECT_EQ(t.nodes[n].excl_ticks.load(), 0u) << n;
    if (n != 0) {
      EXPECT_EQ(t.nodes[n].calls.load(), 0u) << n;
    }
  }
  for (uint32_t i = 0; i <= 2; ++i) {
    EXPECT_EQ(t.stack_[i].start.load(), 5000u) << i;
    EXPECT_EQ(t.stack_[i].child_ticks.load(), 0u) << i;
  }
  // A node named before the fork (a gloo call's bytes told later) names none in the child's
  // tree, though an index of that number exists there.
  EXPECT_EQ(t.node_of_ref(ref_b), ThreadState::kNoNode);
  EXPECT_EQ(t.node_of_ref(ref_c), ThreadState::kNoNode);
  EXPECT_EQ(t.node_of_ref(t.node_ref(c2)), c2);
  // The index knows the new tree: the open path is found again, a closed one made anew.
  EXPECT_EQ(t.child_of(0, 1), a2);
  EXPECT_EQ(t.child_of(a2, 3), c2);
  uint32_t b2 = t.child_of(a2, 2);
  EXPECT_EQ(b2, 3u);
  EXPECT_EQ(t.nodes[b2].calls.load(), 0u);
  // The open frames close into the new tree, and the child's own calls count there.
  leave_at(t, 5100);
  leave_at(t, 5300);
  EXPECT_EQ(t.depth(), 0u);
  EXPECT_EQ(t.nodes[c2].incl_ticks.load(), 100u);
  EXPECT_EQ(t.nodes[a2].incl_ticks.load(), 300u);
  EXPECT_EQ(t.nodes[a2].excl_ticks.load(), 200u);
  (void)a, (void)b, (void)c;
}

TEST(ThreadState, FramesSetAsideBeforeAForkAreNotResumedInTheChild) {
  // A greenlet's frames set aside in the parent name nodes of the parent's tree: resumed in
  // the child they would open on whatever node has that number there (or past its nodes).
  ThreadState t = make_state(1000);
  enter_at(t, 1, 1100);
  enter_at(t, 2, 1200);
  SuspendedFrame saved[4];
  ASSERT_EQ(suspend_stack(&t, saved, 1300), 2u);
  EXPECT_EQ(t.depth(), 0u);
  resume_stack(&t, saved, 2, 1400);  // the same tree: both come back
  EXPECT_EQ(t.depth(), 2u);
  ASSERT_EQ(suspend_stack(&t, saved, 1500), 2u);
  enter_at(t, 7, 1600);  // the forking frame
  t.reset_counts(2000);
  resume_stack(&t, saved, 2, 2100);
  EXPECT_EQ(t.depth(), 1u);  // only the frame open at the fork
  EXPECT_EQ(t.nodes[t.stack_[1].node.load()].routine, 7u);
}

TEST(ThreadState, ResetCountsOnAManyPathTreeKeepsOnlyTheOpenPath) {
  // A fork under a parent of many paths, deep and wide: the new tree is the open path alone,
  // and the index over it works at its small size.
  ThreadState t(0, 1234, 1000, 64, 0);
  uint32_t top = enter_at(t, 1, 1001);
  for (RoutineId r = 100; r < 20100; ++r) {
    enter_at(t, r, 1002);
    leave_at(t, 1003);
  }
  for (RoutineId r = 2; r < 40; ++r) enter_at(t, r, 1004);
  ASSERT_GT(t.nodes.size_owner(), 20000u);
  (void)top;
  t.reset_counts(2000);
  EXPECT_EQ(t.depth(), 39u);
  EXPECT_EQ(t.nodes.size_owner(), 40u);
  for (uint32_t d = 1; d <= 39; ++d) {
    const Node& n = t.nodes[t.stack_[d].node.load()];
    EXPECT_EQ(n.routine, d == 1 ? 1u : d) << d;
    EXPECT_EQ(n.parent, t.stack_[d - 1].node.load()) << d;
  }
  for (RoutineId r = 100; r < 20100; ++r) EXPECT_NE(t.child_of(t.stack_[1].node.load(), r), 0u);
  EXPECT_EQ(t.nodes.size_owner(), 40u + 20000u);
}

std::vector<uint32_t> drained(TraceRing& r) {
  std::vector<uint32_t> out;
  r.drain([&](const TraceEvent& e) { out.push_back(e.node); });
  return out;
}

TEST(TraceRing, KeepsOrderAcrossChunksAndWrapsAround) {
  TraceRing r(10000);  // chunks of 4096, 4096 and 1808 events
  EXPECT_EQ(r.capacity(), 10000u);
  EXPECT_EQ(r.bytes_held(), 0u);  // nothing allocated before the first event
  uint32_t next = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 9000; ++i) r.push(TraceEvent{next++, 0, 0});
    std::vector<uint32_t> got = drained(r);
    ASSERT_EQ(got.size(), 9000u);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], next - 9000 + i);
  }
  EXPECT_EQ(r.dropped(), 0u);
  EXPECT_EQ(r.bytes_held(), 10000 * sizeof(TraceEvent));
}

TEST(TraceRing, AFullRingDropsAndCounts) {
  TraceRing r(16);
  for (uint32_t i = 0; i < 20; ++i) r.push(TraceEvent{i, 0, 0});
  EXPECT_EQ(drained(r).size(), 16u);
  EXPECT_EQ(r.dropped(), 4u);
  EXPECT_EQ(r.dropped_by_budget(), 0u);
}

TEST(TraceRing, TheLargestCapacityReservesNothingUpFront) {
  TraceRing r(uint64_t(1) << 28);  // 6 GiB if reserved whole
  EXPECT_EQ(r.bytes_held(), 0u);
  r.push(TraceEvent{1, 2, 3});
  EXPECT_LE(r.bytes_held(), uint64_t(8) << 20);
  EXPECT_EQ(drained(r), std::vector<uint32_t>{1});
}

TEST(TraceRing, RingsShareTheBudgetAndGiveItBack) {
  TraceBudget budget(2 * 4096 * sizeof(TraceEvent));  // two chunks for everyone
  {
    TraceRing a(1 << 20, &budget), b(1 << 20, &budget);
    for (uint32_t i = 0; i < 4096 + 1; ++i) a.push(TraceEvent{i, 0, 0});  // two chunks
    b.push(TraceEvent{7, 0, 0});                                          // none left
    EXPECT_EQ(a.dropped(), 0u);
    EXPECT_EQ(b.dropped(), 1u);
    EXPECT_EQ(b.dropped_by_budget(), 1u);
    EXPECT_EQ(budget.used(), budget.cap());
  }
  EXPECT_EQ(budget.used(), 0u);
  TraceRing c(64, &budget);
  c.push(TraceEvent{9, 0, 0});
  EXPECT_EQ(drained(c), std::vector<uint32_t>{9});
}

TEST(TraceRing, ClearForgetsUnreadEventsAndCounts) {
  TraceRing r(8);
  for (uint32_t i = 0; i < 10; ++i) r.push(TraceEvent{i, 0, 0});
  r.clear();
  EXPECT_EQ(r.dropped(), 0u);
  EXPECT_TRUE(drained(r).empty());
  r.push(TraceEvent{42, 0, 0});
  EXPECT_EQ(drained(r), std::vector<uint32_t>{42});
}

}  // namespace
}  // namespace sonde
