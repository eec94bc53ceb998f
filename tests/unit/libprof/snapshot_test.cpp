#include "core/snapshot.hpp"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "frames.hpp"
#include "runtime/flush_notes.hpp"

namespace sonde {
namespace {

using test::enter_at;
using test::leave_at;

// A Clock that was never init()ed converts 1 tick to 1 ns with tick 0 at realtime 0, so every
// expected value below is exact.
Clock unit_clock() {
  Clock c;
  EXPECT_DOUBLE_EQ(c.ns_per_tick(), 1.0);
  EXPECT_EQ(c.to_realtime_ns(1234), 1234);
  return c;
}

// incl == excl + sum of the children's incl, for every node.
void expect_times_add_up(const ThreadSnapshot& s) {
  std::map<uint32_t, int64_t> children;
  for (const NodeRow& n : s.nodes) {
    if (n.index != 0) children[n.parent] += n.incl_ns;
  }
  for (const NodeRow& n : s.nodes) {
    EXPECT_EQ(n.incl_ns, n.excl_ns + children[n.index]) << "node " << n.index;
    EXPECT_GE(n.excl_ns, 0) << "node " << n.index;
  }
}

// root(start 1000) -> A [1100, 2000] -> B [1200, 1500], B [1600, 1700]
//                  -> C [2100, open) -> D [2200, open)
struct Scenario : testing::Test {
  ThreadState t{2, 4242, 1000, 16, 0};
  uint32_t a = 0, b = 0, c = 0, d = 0;
  void SetUp() override {
    a = enter_at(t, 1, 1100);
    b = enter_at(t, 2, 1200);
    leave_at(t, 1500);
    EXPECT_EQ(enter_at(t, 2, 1600), b);
    leave_at(t, 1700);
    leave_at(t, 2000);
    c = enter_at(t, 3, 2100);
    d = enter_at(t, 4, 2200);
  }
};

TEST_F(Scenario, ClosedFramesAreExact) {
  ThreadSnapshot s = take_snapshot(t, unit_clock(), 2600);
  ASSERT_EQ(s.nodes.size(), 5u);
  EXPECT_EQ(s.seq, 2u);
  EXPECT_EQ(s.tid, 4242);
  EXPECT_EQ(s.started_ns, 1000);
  EXPECT_FALSE(s.ended_ns.has_value());
  const NodeRow& na = s.nodes[a];
  const NodeRow& nb = s.nodes[b];
  EXPECT_EQ(na.calls, 1u);
  EXPECT_EQ(na.subrs, 2u);
  EXPECT_EQ(na.incl_ns, 900);
  EXPECT_EQ(na.excl_ns, 500);
  EXPECT_EQ(nb.calls, 2u);
  EXPECT_EQ(nb.subrs, 0u);
  EXPECT_EQ(nb.incl_ns, 400);
  EXPECT_EQ(nb.excl_ns, 400);
  EXPECT_EQ(nb.parent, a);
  EXPECT_EQ(nb.depth, 2u);
  EXPECT_EQ(nb.routine, 2u);
}

TEST_F(Scenario, OpenFramesAreChargedUpToNow) {
  ThreadSnapshot s = take_snapshot(t, unit_clock(), 2600);
  EXPECT_EQ(s.nodes[c].incl_ns, 500);  // 2600 - 2100
  EXPECT_EQ(s.nodes[c].excl_ns, 100);  // minus the open child D
  EXPECT_EQ(s.nodes[d].incl_ns, 400);
  EXPECT_EQ(s.nodes[d].excl_ns, 400);
  EXPECT_EQ(s.nodes[c].calls, 1u);
  EXPECT_EQ(s.nodes[d].calls, 1u);
  EXPECT_EQ(s.nodes[0].calls, 1u);
  EXPECT_EQ(s.nodes[0].subrs, 2u);
}

TEST_F(Scenario, RootSpansTheThreadsLife) {
  ThreadSnapshot s = take_snapshot(t, unit_clock(), 2600);
  EXPECT_EQ(s.nodes[0].incl_ns, 1600);  // now - start
  EXPECT_EQ(s.nodes[0].excl_ns, 1600 - 900 - 500);
  expect_times_add_up(s);
}

TEST_F(Scenario, SnapshotDoesNotChangeTheState) {
  ThreadSnapshot first = take_snapshot(t, unit_clock(), 2600);
  ThreadSnapshot again = take_snapshot(t, unit_clock(), 2600);
  ASSERT_EQ(first.nodes.size(), again.nodes.size());
  for (size_t i = 0; i < first.nodes.size(); ++i) {
    EXPECT_EQ(first.nodes[i].incl_ns, again.nodes[i].incl_ns) << i;
    EXPECT_EQ(first.nodes[i].excl_ns, again.nodes[i].excl_ns) << i;
  }
  EXPECT_EQ(t.depth(), 2u);
  EXPECT_EQ(t.nodes[c].incl_ticks.load(), 0u);  // open time is never written back
}

TEST_F(Scenario, LaterSnapshotsGrowAndStillAddUp) {
  ThreadSnapshot early = take_snapshot(t, unit_clock(), 2600);
  leave_at(t, 3000);  // D closes: 800
  ThreadSnapshot later = take_snapshot(t, unit_clock(), 3500);
  EXPECT_EQ(later.nodes[d].incl_ns, 800);
  EXPECT_EQ(later.nodes[c].incl_ns, 1400);
  EXPECT_EQ(later.nodes[c].excl_ns, 600);
  EXPECT_EQ(later.nodes[0].incl_ns, 2500);
  for (size_t i = 0; i < early.nodes.size(); ++i) {
    EXPECT_GE(later.nodes[i].incl_ns, early.nodes[i].incl_ns) << i;
  }
  expect_times_add_up(later);
}

TEST_F(Scenario, AnEndedThreadIsChargedUpToItsEnd) {
  leave_at(t, 2300);
  leave_at(t, 2400);
  t.mark_ended(2500);
  ThreadSnapshot s = take_snapshot(t, unit_clock(), 9999);
  ASSERT_TRUE(s.ended_ns.has_value());
  EXPECT_EQ(*s.ended_ns, 2500);
  EXPECT_EQ(s.nodes[0].incl_ns, 1500);
  EXPECT_EQ(s.nodes[c].incl_ns, 300);
  EXPECT_EQ(s.nodes[d].incl_ns, 100);
  expect_times_add_up(s);
}

TEST_F(Scenario, ShapesCostsAndCountersAreCopied) {
  CallCost cost{1000, 64, GemmShape{4, 5, 6, 1, 'N', 'T', DType::kF64}, {}};
  uint32_t g = enter_at(t, 9, 2300);
  leave_at(t, 2350, &cost, reinterpret_cast<const void*>(0x42));
  bump(t.depth_overflows, 3);
  bump(t.node_overflows, 4);
  bump(t.region_mismatches, 5);
  ThreadSnapshot s = take_snapshot(t, unit_clock(), 2600);
  EXPECT_EQ(s.nodes[g].flops, 1000u);
  EXPECT_EQ(s.nodes[g].bytes, 64u);
  EXPECT_EQ(s.nodes[g].parent, d);
  ASSERT_EQ(s.shapes.size(), 1u);
  EXPECT_EQ(s.shapes[0].node, g);
  EXPECT_EQ(s.shapes[0].site, reinterpret_cast<const void*>(0x42));
  EXPECT_EQ(s.shapes[0].calls, 1u);
  EXPECT_EQ(s.shapes[0].time_ns, 50);
  EXPECT_EQ(s.shapes[0].shape.k, 6);
  EXPECT_EQ(s.shapes[0].shape.trans_b, 'T');
  EXPECT_EQ(s.depth_overflows, 3u);
  EXPECT_EQ(s.node_overflows, 4u);
  EXPECT_EQ(s.region_mismatches, 5u);
  expect_times_add_up(s);
  // Each cause its note: calls past the node limit were said as depth (a red-team program of
  // 2M call paths three deep read "953440 calls deeper than SONDE_MAX_DEPTH=1024").
  SnapshotLosses losses;
  losses.add(s, t);
  std::map<std::string, std::string> notes;
  note_losses(losses, true, 0, Config{}, "",
              [&](const std::string& topic, const std::string& text, bool, const std::string&) {
                notes[topic] = text;
              });
  EXPECT_EQ(notes["depth"].substr(0, 35), "3 calls deeper than SONDE_MAX_DEPTH");
  EXPECT_EQ(notes["nodes"].substr(0, 41), "4 calls beyond the 1048576 call paths one");
}

// The recursion flag is decided here, where the tree is copied, not by the store: a node is
// recursive when its routine is also one of its callers', at any distance.
// A recursion past the stack's first room (256) grows it: every level is a frame, the times
// add up across the growth, and a snapshot taken that deep sees every open frame.
TEST(DeepStack, ARecursionPastTheFirstRoomIsRecordedWhole) {
  ThreadState t(0, 1, 0, 1000, 0);
  ASSERT_EQ(t.stack_.room(), 256u);
  constexpr uint32_t kDeep = 700;
  std::vector<uint32_t> nodes;
  for (uint32_t i = 0; i < kDeep; ++i) nodes.push_back(enter_at(t, 7, 10 + i));
  EXPECT_EQ(t.depth(), kDeep);
  EXPECT_EQ(t.stack_.room(), 1000u);  // 256, 512, then the limit
  EXPECT_EQ(t.depth_overflows.load(), 0u);
  // Open, 700 deep: the snapshot reads the frames from the grown stack.
  ThreadSnapshot open = take_snapshot(t, unit_clock(), 2000);
  EXPECT_EQ(open.nodes[nodes[0]].incl_ns, 2000 - 10);
  EXPECT_EQ(open.nodes[nodes[kDeep - 1]].incl_ns, 2000 - (10 + kDeep - 1));
  EXPECT_EQ(open.nodes[nodes[300]].excl_ns, 1);  // its open child started 1 tick later
  expect_times_add_up(open);
  // Each level closes 1 tick after the one beneath it, from 1000 up.
  for (uint32_t i = 0; i < kDeep; ++i) leave_at(t, 1000 + i);
  ThreadSnapshot s = take_snapshot(t, unit_clock(), 3000);
  ASSERT_EQ(s.nodes.size(), size_t(kDeep) + 1);
  for (uint32_t i = 0; i < kDeep; ++i) {
    const NodeRow& n = s.nodes[nodes[i]];
    EXPECT_EQ(n.depth, i + 1);
    EXPECT_EQ(n.calls, 1u);
    // Entered at 10 + i, left at 1000 + (kDeep - 1 - i).
    ASSERT_EQ(n.incl_ns, int64_t(1000 + (kDeep - 1 - i)) - int64_t(10 + i)) << i;
    ASSERT_EQ(n.excl_ns, i + 1 == kDeep ? n.incl_ns : 2) << i;
  }
  expect_times_add_up(s);
}

// At the limit, a deeper call is refused and counted, as with a stack that never grew.
TEST(DeepStack, CallsPastTheLimitAreChargedToTheDeepestFrameAndCounted) {
  ThreadState t(0, 1, 0, 300, 0);
  for (uint32_t i = 0; i < 300; ++i) enter_at(t, 7, 10 + i);
  EXPECT_EQ(t.stack_.room(), 300u);
  EXPECT_EQ(open_frame<true>(&t, 7, Nesting::kChildren), nullptr);
  EXPECT_EQ(t.depth(), 300u);
  EXPECT_EQ(t.depth_overflows.load(), 1u);
  // A limit under the first room is the room itself.
  ThreadState small(0, 1, 0, 16, 0);
  EXPECT_EQ(small.stack_.room(), 16u);
  EXPECT_FALSE(small.stack_.grow(16));
}

TEST(SnapshotRecursion, ANodeIsRecursiveWhenAnAncestorIsTheSameRoutine) {
  ThreadState t(0, 1, 0, 16, 0);
  // root -> 1 -> 2 -> 1 -> 1, then root -> 2 -> 3 (2 twice in the tree, never nested)
  uint32_t outer = enter_at(t, 1, 10);
  uint32_t mid = enter_at(t, 2, 20);
  uint32_t indirect = enter_at(t, 1, 30);
  uint32_t direct = enter_at(t, 1, 40);
  for (uint64_t at : {50, 60, 70, 80}) leave_at(t, at);
  uint32_t other = enter_at(t, 2, 90);
  uint32_t leaf = enter_at(t, 3, 100);
  leave_at(t, 110);
  leave_at(t, 120);
  ThreadSnapshot s = take_snapshot(t, unit_clock(), 200);
  ASSERT_EQ(s.nodes.size(), 7u);
  EXPECT_FALSE(s.nodes[0].recursive);
  EXPECT_FALSE(s.nodes[outer].recursive);
  EXPECT_FALSE(s.nodes[mid].recursive);
  EXPECT_TRUE(s.nodes[indirect].recursive);  // 1 -> 2 -> 1
  EXPECT_TRUE(s.nodes[direct].recursive);    // 1 -> 1
  EXPECT_FALSE(s.nodes[other].recursive);    // same routine as mid, but its sibling's branch
  EXPECT_FALSE(s.nodes[leaf].recursive);
}

// A frame still open is flagged too: a periodic flush of a deep recursion writes it right.
TEST(SnapshotRecursion, OpenRecursiveFramesAreFlagged) {
  ThreadState t(0, 1, 0, 64, 0);
  std::vector<uint32_t> nodes;
  for (uint64_t i = 0; i < 20; ++i) nodes.push_back(enter_at(t, 7, 10 + i));
  ThreadSnapshot s = take_snapshot(t, unit_clock(), 100);
  EXPECT_FALSE(s.nodes[nodes[0]].recursive);
  for (size_t i = 1; i < nodes.size(); ++i) EXPECT_TRUE(s.nodes[nodes[i]].recursive) << i;
  expect_times_add_up(s);
}

TEST(Snapshot, TicksAreConvertedWithTheClockRatio) {
  Clock clock;
  clock.init();
  clock.refresh();
  double ratio = clock.ns_per_tick();
  ASSERT_GT(ratio, 0.0);
  ThreadState t(0, 1, 1000000, 8, 0);
  enter_at(t, 1, 1000000);
  leave_at(t, 3000000);
  ThreadSnapshot s = take_snapshot(t, clock, 5000000);
  EXPECT_NEAR(double(s.nodes[1].incl_ns), 2000000 * ratio, 1.0);
  EXPECT_NEAR(double(s.nodes[0].incl_ns), 4000000 * ratio, 1.0);
  EXPECT_NEAR(double(s.nodes[0].excl_ns), 2000000 * ratio, 1.0);
}

// A call that ends after a flush is written at a later flush than its first child; both
// timestamps must come from one ratio or the parent can appear to start after the child.
TEST(Snapshot, TimestampsKeepOneRatioOnceASecondIsMeasured) {
  Clock clock;                  // ticks0 = 0, mono0 = 0, realtime0 = 0
  clock.refresh_at(1000, 100);  // 0.1 ratio after 100 ns: not yet frozen
  EXPECT_EQ(clock.to_realtime_ns(1000), 100);
  clock.refresh_at(2000000000, 1000000000);  // 0.5 after one second: frozen
  EXPECT_EQ(clock.to_realtime_ns(2000000000), 1000000000);
  clock.refresh_at(4000000000, 2100000000);  // the ratio moves to 0.525 ...
  EXPECT_DOUBLE_EQ(clock.ns_per_tick(), 0.525);
  EXPECT_EQ(clock.to_ns(2000), 1050);                       // ... for durations
  EXPECT_EQ(clock.to_realtime_ns(2000000000), 1000000000);  // not for timestamps
  EXPECT_EQ(clock.to_realtime_ns(4000000000), 2000000000);
}

// A preemption between the tick and the time read beside it is seen as a wide window, and
// that try is passed over for a tight one.
TEST(Snapshot, ClockPairsPassOverATryThatWasPreempted) {
  int64_t mono = 1000;
  uint64_t ticks = 5000;
  int call = 0;
  // The first try is preempted for 4 ms after its tick; the second is tight.
  auto read_mono = [&] { return mono += (++call == 2 ? 4000000 : 30); };
  auto read_ticks = [&] { return ticks += 60; };
  ClockPair p = read_clock_pair(read_ticks, read_mono);
  EXPECT_EQ(p.window_ns, 30);
  EXPECT_EQ(p.ticks, 5120u);
  EXPECT_EQ(p.mono_ns, 1000 + 30 + 4000000 + 30 + 15);  // the middle of the tight window
  // It stopped at the first tight try.
  EXPECT_EQ(call, 4);
}

TEST(Snapshot, ClockPairsKeepTheTightestWhenNoneIsTight) {
  const int64_t windows[kClockPairTries] = {9000, 7000, 3000, 8000, 9000, 9000, 9000, 9000};
  int reads = 0;
  int64_t now = 0;
  auto read_mono = [&] {
    if (reads % 2 == 1) now += windows[reads / 2];  // a try's second read closes its window
    ++reads;
    return now;
  };
  uint64_t ticks = 0;
  auto read_ticks = [&] { return ++ticks; };
  ClockPair p = read_clock_pair(read_ticks, read_mono);
  EXPECT_EQ(reads, 2 * kClockPairTries);
  EXPECT_EQ(p.window_ns, 3000);
  EXPECT_EQ(p.ticks, 3u);
}

TEST(Snapshot, TraceEventsAreDrainedInRealtime) {
  ThreadState t(0, 1, 100, 8, 4);
  for (uint64_t i = 0; i < 6; ++i) t.trace->push(TraceEvent{0, 100 + i, 200 + i});
  ThreadSnapshot s = take_snapshot(t, Clock{}, 500);
  ASSERT_EQ(s.events.size(), 4u);  // a ring of 4 keeps the first 4 and counts the rest
  EXPECT_EQ(s.events[0].start_ns, 100);
  EXPECT_EQ(s.events[3].end_ns, 203);
  EXPECT_EQ(s.dropped_events, 2u);
  EXPECT_TRUE(take_snapshot(t, Clock{}, 500).events.empty());  // drained once
}

}  // namespace
}  // namespace sonde
