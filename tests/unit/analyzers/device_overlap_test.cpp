// The union and intersection lengths the breakdown's GPU overlap is made of, on intervals whose
// answers are worked out by hand: overlapping, nested, touching, unsorted and empty ones.
#include "metrics/device_overlap.hpp"

#include <gtest/gtest.h>

namespace sonde::analyzers {
namespace {

TEST(DeviceOverlap, UnionCountsConcurrentTimeOnce) {
  EXPECT_EQ(union_ns({}), 0);
  EXPECT_EQ(union_ns({{0, 10}}), 10);
  EXPECT_EQ(union_ns({{5, 8}, {0, 10}}), 10);          // nested, unsorted
  EXPECT_EQ(union_ns({{0, 4}, {3, 6}, {10, 12}}), 8);  // overlapping, then apart
  EXPECT_EQ(union_ns({{0, 4}, {4, 6}}), 6);            // touching
  EXPECT_EQ(union_ns({{3, 3}, {7, 2}, {0, 1}}), 1);    // empty and reversed ones are nothing
}

TEST(DeviceOverlap, IntersectionOfUnionsNotSumOfPairs) {
  // Two compute kernels on two streams, [4, 9] and [8, 10], under one NCCL kernel [7, 11]:
  // pairwise sums would give 2 + 2 = 4; the communication hidden is [7, 10].
  DeviceOverlap o = device_overlap({{7, 11}}, {{4, 9}, {8, 10}});
  EXPECT_EQ(o.comm_ns, 4);
  EXPECT_EQ(o.compute_ns, 6);
  EXPECT_EQ(o.overlap_ns, 3);
}

TEST(DeviceOverlap, SeveralIntervalsOnBothSides) {
  // comm [0, 2] [5, 9] [9.5 -> 10, 14]; compute [1, 6] [8, 11] [13, 20].
  DeviceOverlap o = device_overlap({{10, 14}, {0, 2}, {5, 9}}, {{13, 20}, {1, 6}, {8, 11}});
  EXPECT_EQ(o.comm_ns, 2 + 4 + 4);
  EXPECT_EQ(o.compute_ns, 5 + 3 + 7);
  // [1, 2] + [5, 6] + [8, 9] + [10, 11] + [13, 14]
  EXPECT_EQ(o.overlap_ns, 5);
}

TEST(DeviceOverlap, NothingToOverlapWith) {
  DeviceOverlap o = device_overlap({{0, 5}, {2, 7}}, {});
  EXPECT_EQ(o.comm_ns, 7);
  EXPECT_EQ(o.compute_ns, 0);
  EXPECT_EQ(o.overlap_ns, 0);
  o = device_overlap({{0, 5}}, {{5, 9}});  // back to back: no overlap
  EXPECT_EQ(o.overlap_ns, 0);
  o = device_overlap({{2, 3}}, {{0, 10}});  // all of it hidden
  EXPECT_EQ(o.overlap_ns, 1);
}

}  // namespace
}  // namespace sonde::analyzers
