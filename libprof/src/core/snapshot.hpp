// A copy of one thread's measurements in nanoseconds, taken by the flushing thread while the
// owner keeps running. Frames still open are charged up to `now`, so a periodic flush (and the
// file a crash leaves) already shows where a long phase is spending its time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.hpp"
#include "core/huge_pages.hpp"
#include "core/thread_state.hpp"

namespace sonde {

struct NodeRow {
  uint32_t index, parent;
  RoutineId routine;
  uint32_t depth;
  uint64_t calls, subrs;
  int64_t incl_ns, excl_ns;
  uint64_t flops, bytes;
  // Its routine is also one of its callers' (hotspots counts only the outermost inclusive time).
  bool recursive;
  // Adaptive timing: incl_ns and excl_ns are scaled from `timed` timed calls of the `sampled`
  // calls after the warm-up, incl_ns within about incl_se_ns (one standard error); 0: exact.
  uint64_t timed, sampled;
  int64_t incl_se_ns;
};

// Huge pages: see core/huge_pages.hpp.
using NodeRows = HugeVector<NodeRow>;

struct ShapeRow {
  uint32_t index, node;
  const void* site;
  GemmShape shape;
  uint64_t calls;
  int64_t time_ns;
  uint64_t flops, bytes;
  // Where the call came from, named by CallSites (core/call_sites.hpp); "" until then.
  std::string_view call_site = "";
};

// `index`: the record's in the thread's table (the store writes a row only where it moved);
// kNoRecord for a row of no record (a call still open at the last flush), always written.
inline constexpr uint32_t kNoRecord = UINT32_MAX;
struct CommRow {
  uint32_t node;
  CommCost comm;
  uint64_t bytes, calls;
  int64_t time_ns;
  uint32_t index;
};

// An operator's calls on one call path with one input signature (`--record-shapes`); the texts
// live in the process's OpSignatures for its life.
struct OpShapeRow {
  uint32_t node;
  std::string_view shapes, dtypes;
  uint64_t calls;
  int64_t time_ns;
  uint32_t index;
};

struct CommOverlapRow {
  int64_t exposed_ns, overlapped_ns, inflight_ns;
  uint64_t untracked;
};

struct LineRow {
  RoutineId routine;
  int line;
  uint64_t hits;
  int64_t time_ns;
};

struct TraceRow {
  uint32_t node;
  int64_t start_ns, end_ns;  // CLOCK_REALTIME-based
};

// The sampler's counts on one node (SONDE_SAMPLE_HZ): native frames below it, root first.
struct SampleRow {
  uint32_t node;
  std::vector<uintptr_t> frames;
  uint64_t count;
};

struct ThreadSnapshot {
  const ThreadState* state;
  uint32_t seq;
  pid_t tid;
  std::string name;  // from /proc; empty once the thread is gone
  int64_t started_ns;
  std::optional<int64_t> ended_ns;
  std::optional<int64_t> cpu_ns;  // its CPU time over the same life (ThreadState::cpu_ns)
  bool ftz, daz;
  NodeRows nodes;  // index order: a parent always precedes its children
  // With counters on (`counters` of them): node i's inclusive counts at [2 i counters ...) and
  // its exclusive ones right after; empty otherwise, so that a flush of many paths without
  // counters does not copy their empty slots.
  uint32_t counters = 0;
  std::vector<uint64_t> counter_values;
  const uint64_t* counter_incl(uint32_t node) const {
    return counter_values.data() + size_t(2) * counters * node;
  }
  const uint64_t* counter_excl(uint32_t node) const { return counter_incl(node) + counters; }
  std::vector<ShapeRow> shapes;
  std::vector<LineRow> lines;
  std::vector<CommRow> comms;
  std::vector<OpShapeRow> op_shapes;
  std::optional<CommOverlapRow> comm_overlap;  // set once the thread made a communication call
  std::vector<TraceRow> events;
  std::vector<SampleRow> samples;
  uint64_t samples_dropped = 0;
  uint64_t dropped_events, depth_overflows, node_overflows, region_mismatches;
  uint64_t abandoned = 0;
};

// `rows`: a previous snapshot's nodes, whose memory the copy reuses (core/huge_pages.hpp).
// `last`: the process's last flush (exit, a signal): in trace mode the frames still open get
// their event, ending now (os._exit inside main(), a fork child's inherited frames), which no
// later flush would write.
ThreadSnapshot take_snapshot(ThreadState& t, const Clock& clock, uint64_t now, NodeRows rows = {},
                             bool last = false);

}  // namespace sonde
