// How much of a device's communication ran while it computed: the time NCCL kernels were on the
// device, the time compute kernels were, and the time both were, each the length of a union of
// intervals. Sums would count twice what runs at once (two streams, kernels of one collective).
#pragma once

#include <cstdint>
#include <vector>

namespace sonde::analyzers {

struct Interval {
  std::int64_t start = 0, end = 0;  // ns; an interval with end <= start is empty
};

struct DeviceOverlap {
  std::int64_t comm_ns = 0;     // the union of the communication intervals
  std::int64_t compute_ns = 0;  // the union of the compute intervals
  std::int64_t overlap_ns = 0;  // their intersection: communication hidden behind compute
};

// The length of the union of `intervals` (any order, overlapping or not).
std::int64_t union_ns(std::vector<Interval> intervals);

DeviceOverlap device_overlap(std::vector<Interval> comm, std::vector<Interval> compute);

}  // namespace sonde::analyzers
