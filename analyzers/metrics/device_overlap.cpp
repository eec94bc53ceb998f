#include "metrics/device_overlap.hpp"

#include <algorithm>

namespace sonde::analyzers {
namespace {

// Sorted, disjoint and non-empty: the union as intervals.
std::vector<Interval> merged(std::vector<Interval> in) {
  std::erase_if(in, [](const Interval& i) { return i.end <= i.start; });
  std::sort(in.begin(), in.end(),
            [](const Interval& a, const Interval& b) { return a.start < b.start; });
  std::vector<Interval> out;
  for (const Interval& i : in) {
    if (!out.empty() && i.start <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

std::int64_t length(const std::vector<Interval>& disjoint) {
  std::int64_t n = 0;
  for (const Interval& i : disjoint) n += i.end - i.start;
  return n;
}

}  // namespace

std::int64_t union_ns(std::vector<Interval> intervals) {
  return length(merged(std::move(intervals)));
}

DeviceOverlap device_overlap(std::vector<Interval> comm, std::vector<Interval> compute) {
  std::vector<Interval> a = merged(std::move(comm)), b = merged(std::move(compute));
  DeviceOverlap out{length(a), length(b), 0};
  // Both lists are sorted and disjoint: walk them together, advancing the one that ends first.
  for (std::size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    std::int64_t lo = std::max(a[i].start, b[j].start), hi = std::min(a[i].end, b[j].end);
    if (hi > lo) out.overlap_ns += hi - lo;
    if (a[i].end < b[j].end) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

}  // namespace sonde::analyzers
