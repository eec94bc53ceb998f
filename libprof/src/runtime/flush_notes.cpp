#include "runtime/flush_notes.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <vector>

namespace sonde {

void SnapshotLosses::add(const ThreadSnapshot& s, const ThreadState& t) {
  overflows += s.depth_overflows;
  node_overflows += s.node_overflows;
  abandoned += s.abandoned;
  mismatches += s.region_mismatches;
  dropped += s.dropped_events;
  if (s.comm_overlap) untracked += s.comm_overlap->untracked;
  if (t.trace) over_budget += t.trace->dropped_by_budget();
  if (t.trace) unwritten += t.trace->unwritten();
  samples_dropped += s.samples_dropped;
}

namespace {

// Each cause of the dropped trace events with its share: a full buffer, the process's budget, a
// flush that failed.
std::string trace_drop_causes(const SnapshotLosses& l, const Config& c,
                              const std::string& trace_loss_error) {
  uint64_t by_buffer = l.dropped - std::min(l.dropped, l.over_budget + l.unwritten);
  std::vector<std::string> causes;
  if (by_buffer > 0)
    causes.push_back(
        fmt::format("{} beyond SONDE_TRACE_BUFFER={} per thread", by_buffer, c.trace_buffer));
  if (l.over_budget > 0)
    causes.push_back(fmt::format("{} beyond SONDE_TRACE_MEMORY={} MiB for all threads",
                                 l.over_budget, c.trace_memory_mb));
  if (l.unwritten > 0)
    causes.push_back(fmt::format("{} taken by a flush that could not be written: {}", l.unwritten,
                                 trace_loss_error));
  return fmt::format("{}", fmt::join(causes, "; "));
}

}  // namespace

void note_losses(const SnapshotLosses& l, bool final, uint64_t sampler_faults, const Config& c,
                 const std::string& trace_loss_error, const FlushNoteSink& note) {
  if (sampler_faults > 0) {
    note("samples",
         fmt::format("{} samples abandoned by the sampler: their native stack could not be read "
                     "(a fault in the unwinder, caught)",
                     sampler_faults),
         false, "samples abandoned by the sampler");
  }
  if (l.samples_dropped > 0) {
    note("samples",
         fmt::format("{} samples dropped by the sampler (its per-thread ring was full between "
                     "two drains); the sampled shares are those of the samples kept",
                     l.samples_dropped),
         false, "samples dropped by the sampler");
  }
  // At the last flush only: the calls are counted when the thread next returns, so a count
  // before the end can still be taken back.
  if (l.abandoned > 0 && final) {
    note("longjmp",
         fmt::format("{} measured calls never returned (left by a longjmp out of "
                     "a signal handler, or an exception thrown through them): "
                     "each is counted, and its time is in its caller's, from "
                     "the next measured call of its thread on",
                     l.abandoned),
         false, "");
  }
  if (l.overflows > 0) {
    note("depth",
         fmt::format("{} calls deeper than SONDE_MAX_DEPTH={} were charged to their caller",
                     l.overflows, c.max_depth),
         true, "deeper than SONDE_MAX_DEPTH");
  }
  // Apart from depth: a red-team program of 2M distinct call paths three deep read "953440
  // calls deeper than SONDE_MAX_DEPTH=1024 (or beyond the node limit)".
  if (l.node_overflows > 0) {
    note("nodes",
         fmt::format("{} calls beyond the {} call paths one thread can hold were charged to "
                     "their caller (a thread made more distinct call paths: generated code, "
                     "many distinct callers of many functions)",
                     l.node_overflows, ThreadState::kMaxNodes),
         true, "call paths one thread can hold");
  }
  if (l.dropped > 0) {
    note("trace-drops",
         fmt::format("{} events dropped in trace mode ({}); the profile itself "
                     "counts every call",
                     l.dropped, trace_drop_causes(l, c, trace_loss_error)),
         false, "events dropped in trace mode");
  }
  if (l.untracked > 0) {
    note("comm-untracked",
         fmt::format("{} nonblocking requests were started while 64 were outstanding on "
                     "their thread: comm_overlap's in-flight figures leave them out",
                     l.untracked),
         false, "nonblocking requests were started while 64");
  }
  if (l.mismatches > 0) {
    note("regions",
         fmt::format("{} region end{} did not match the innermost open region", l.mismatches,
                     l.mismatches == 1 ? "" : "s"),
         true, "did not match the innermost open region");
  }
}

}  // namespace sonde
