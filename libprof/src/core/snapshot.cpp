#include "core/snapshot.hpp"

#include <cmath>

#include "core/adaptive_timing.hpp"
#include "core/op_signatures.hpp"
#include "core/proc_file.hpp"

namespace sonde {

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;

std::string thread_name(pid_t tid) {
  std::string name = read_proc_file("/proc/self/task/" + std::to_string(tid) + "/comm", 64);
  return name.substr(0, name.find('\n'));
}

// A node is recursive when its routine is also one of its callers'. Parents precede their
// children in index order, so each walk only reads rows already copied.
void mark_recursion(NodeRows& nodes) {
  for (size_t i = 1; i < nodes.size(); ++i) {
    NodeRow& n = nodes[i];
    for (uint32_t a = n.parent; a < i; a = nodes[a].parent) {
      if (nodes[a].routine == n.routine) {
        n.recursive = true;
        break;
      }
      if (a == 0) break;
    }
  }
}
// A communication call still open at the thread's last flush (a rank killed in a hung
// MPI_Allreduce, or by another rank's MPI_Abort): its frame is charged up to the flush below,
// and its time so far is communication too, exposed where its end would have said so. Until
// 2026-12-06 such a rank read 4.56 s of its 4.9 s as compute and 0.001 s of communication.
void add_open_comm_call(const ThreadState& t, const Clock& clock, uint64_t now, ThreadSnapshot& s) {
  const PendingComm& p = t.pending_comm;
  if (!p.pending.load(std::memory_order_acquire)) return;
  uint32_t depth = t.depth_.load(std::memory_order_acquire);
  uint32_t at = p.depth.load(kRelaxed) + 1;
  uint32_t node = p.node.load(kRelaxed);
  FrameStack::View stack = t.stack_.view();
  if (at > depth || at >= stack.room || stack.entries[at].node.load(kRelaxed) != node) return;
  uint64_t start = p.start.load(kRelaxed);
  if (now <= start) return;
  uint64_t ns = clock.to_ns(now - start);
  CommCost comm{CommKind(p.kind.load(kRelaxed)), p.blocking.load(kRelaxed), p.size.load(kRelaxed)};
  uint64_t bytes = p.bytes.load(kRelaxed);
  bool merged = false;
  for (CommRow& r : s.comms) {
    if (r.node == node && r.bytes == bytes && r.comm.kind == comm.kind &&
        r.comm.blocking == comm.blocking && r.comm.comm_size == comm.comm_size) {
      r.calls += 1;
      r.time_ns += int64_t(ns);
      merged = true;
      break;
    }
  }
  if (!merged) s.comms.push_back(CommRow{node, comm, bytes, 1, int64_t(ns), kNoRecord});
  if (p.exposed.load(kRelaxed)) {
    if (!s.comm_overlap) s.comm_overlap = CommOverlapRow{};
    s.comm_overlap->exposed_ns += int64_t(ns);
  }
}

}  // namespace

ThreadSnapshot take_snapshot(ThreadState& t, const Clock& clock, uint64_t now, NodeRows rows,
                             bool last) {
  ThreadSnapshot s{};
  s.state = &t;
  s.seq = t.seq();
  s.tid = t.tid();
  s.started_ns = clock.to_realtime_ns(t.start_ticks());
  uint64_t end = t.end_ticks();
  s.name = end == 0 ? thread_name(t.tid()) : std::string(t.final_name());
  if (end != 0) {
    s.ended_ns = clock.to_realtime_ns(end);
    now = end;
  }
  if (int64_t cpu = t.cpu_ns(); cpu >= 0) s.cpu_ns = cpu;
  uint32_t fpu = t.fpu_seen.load(kRelaxed);
  s.ftz = (fpu & (1u << 15)) != 0;
  s.daz = (fpu & (1u << 6)) != 0;

  // Drained into counts by the flusher before this copy, under the same lock.
  if (t.samples) {
    s.samples_dropped = t.samples->ring.dropped();
    for (const auto& [key, count] : t.samples->counts) {
      // Innermost first in the ring, outermost first in the tree.
      s.samples.push_back(SampleRow{key.first, {key.second.rbegin(), key.second.rend()}, count});
    }
  }
  // Shapes and trace events name nodes: they are read before the nodes, so that every node they
  // name (published before any record of it) is in the copy. Read after, a shape recorded on a
  // node created in between pointed past the copied nodes (the store then read out of bounds).
  uint32_t ns = t.shapes.size_acquire();
  s.shapes.reserve(ns);
  for (uint32_t i = 0; i < ns; ++i) {
    const ShapeRecord& r = t.shapes[i];
    uint64_t calls = r.calls.load(kRelaxed);
    uint64_t ticks = r.ticks.load(kRelaxed);
    // Adaptive timing left some calls untimed: the shape's time is its timed calls' scaled.
    uint64_t timed = r.timed.load(kRelaxed);
    if (timed != 0 && timed < calls)
      ticks = uint64_t(double(ticks) * double(calls) / double(timed));
    s.shapes.push_back(ShapeRow{i, r.node, r.site, r.shape, calls, clock.to_ns(ticks),
                                r.flops.load(kRelaxed), r.bytes.load(kRelaxed)});
  }

  uint32_t nc = t.comms.size_acquire();
  s.comms.reserve(nc);
  for (uint32_t i = 0; i < nc; ++i) {
    const CommRecord& r = t.comms[i];
    s.comms.push_back(CommRow{r.node, r.comm, r.bytes, r.calls.load(kRelaxed),
                              clock.to_ns(r.ticks.load(kRelaxed)), i});
  }
  uint32_t no = t.op_shapes.size_acquire();
  s.op_shapes.reserve(no);
  for (uint32_t i = 0; i < no; ++i) {
    const OpShapeRecord& r = t.op_shapes[i];
    if (const OpSignature* sig = op_signatures().get(r.signature))
      s.op_shapes.push_back(OpShapeRow{r.node, sig->shapes, sig->dtypes, r.calls.load(kRelaxed),
                                       clock.to_ns(r.ticks.load(kRelaxed)), i});
  }
  if (t.comm_clock.used.load(std::memory_order_acquire)) {
    const CommClock& c = t.comm_clock;
    s.comm_overlap = CommOverlapRow{
        clock.to_ns(c.exposed.load(kRelaxed)), clock.to_ns(c.overlapped.load(kRelaxed)),
        clock.to_ns(c.inflight_ticks.load(kRelaxed)), c.untracked.load(kRelaxed)};
  }
  if (last) add_open_comm_call(t, clock, now, s);

  if (t.trace) {
    t.trace->drain([&](const TraceEvent& e) {
      s.events.push_back(
          TraceRow{e.node, clock.to_realtime_ns(e.start), clock.to_realtime_ns(e.end)});
    });
    s.dropped_events = t.trace->dropped() + t.trace->unwritten();
  }
  uint32_t n = t.nodes.size_acquire();
  s.nodes = std::move(rows);
  s.nodes.clear();
  s.nodes.reserve(n);  // not resize: a zero-fill pass over 99,000 rows before the copy
  for (uint32_t i = 0; i < n; ++i) {
    const Node& node = t.nodes[i];
    uint64_t calls = node.calls.load(kRelaxed);
    NodeTimes times =
        node_times(node, calls, node.timed.load(kRelaxed) != 0 ? outliers_of(t, i) : nullptr);
    s.nodes.push_back(NodeRow{
        i, node.parent, node.routine, node.depth, calls, node.subrs.load(kRelaxed),
        times.incl_ticks, times.excl_ticks, node.flops.load(kRelaxed), node.bytes.load(kRelaxed),
        false, times.timed, times.sampled, clock.to_ns(uint64_t(std::llround(times.se_ticks)))});
  }
  mark_recursion(s.nodes);
  s.counters = t.counters;
  if (s.counters != 0) {
    const uint32_t k = s.counters;
    s.counter_values.assign(size_t(2) * k * n, 0);
    for (uint32_t i = 0; i < n; ++i) {
      uint64_t* incl = s.counter_values.data() + size_t(2) * k * i;
      for (uint32_t c = 0; c < k; ++c) {
        incl[c] = t.nodes[i].counter_incl[c].load(kRelaxed);
        incl[k + c] = t.nodes[i].counter_excl[c].load(kRelaxed);
      }
    }
    // The root cannot read another thread's counters: it shows what its children counted.
    for (uint32_t i = 1; i < n; ++i) {
      if (s.nodes[i].depth != 1) continue;
      for (uint32_t c = 0; c < k; ++c)
        s.counter_values[c] += s.counter_values[size_t(2) * k * i + c];
    }
  }

  // Open frames: frame i has run (now - start_i); its children's completed time is in
  // child_ticks_i and its open child's time is the next frame's elapsed time. The root (frame 0)
  // spans the thread's life so far.
  uint32_t depth = t.depth_.load(std::memory_order_acquire);
  FrameStack::View stack = t.stack_.view();
  if (depth > stack.room) depth = stack.room;
  std::vector<int64_t> elapsed(depth + 2, 0);
  for (uint32_t i = 0; i <= depth; ++i) {
    uint64_t start = stack.entries[i].start.load(kRelaxed);
    elapsed[i] = now > start ? int64_t(now - start) : 0;
  }
  for (uint32_t i = 0; i <= depth; ++i) {
    const StackEntry& e = stack.entries[i];
    uint32_t node = e.node.load(kRelaxed);
    if (node >= n) continue;
    int64_t excl = elapsed[i] - int64_t(e.child_ticks.load(kRelaxed)) - elapsed[i + 1];
    if (i == 0) {
      // The root never closes: its totals are entirely the open part.
      s.nodes[node].incl_ns = elapsed[0];
      s.nodes[node].excl_ns = excl;
    } else {
      s.nodes[node].incl_ns += elapsed[i];
      s.nodes[node].excl_ns += excl;
      if (last && t.trace) {
        s.events.push_back(TraceRow{node, clock.to_realtime_ns(now - uint64_t(elapsed[i])),
                                    clock.to_realtime_ns(now)});
      }
    }
  }
  for (auto& row : s.nodes) {
    row.incl_ns = clock.to_ns(uint64_t(std::max<int64_t>(row.incl_ns, 0)));
    row.excl_ns = clock.to_ns(uint64_t(std::max<int64_t>(row.excl_ns, 0)));
  }

  uint32_t nl = t.lines.size_acquire();
  s.lines.reserve(nl);
  for (uint32_t i = 0; i < nl; ++i) {
    const LineRecord& r = t.lines[i];
    s.lines.push_back(
        LineRow{r.routine, r.line, r.hits.load(kRelaxed), clock.to_ns(r.ticks.load(kRelaxed))});
  }

  s.depth_overflows = t.depth_overflows.load(kRelaxed);
  s.abandoned = t.abandoned.load(kRelaxed);
  s.node_overflows = t.node_overflows.load(kRelaxed);
  s.region_mismatches = t.region_mismatches.load(kRelaxed);
  return s;
}

}  // namespace sonde
