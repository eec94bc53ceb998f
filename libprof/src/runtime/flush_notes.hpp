// What a flush's snapshots lost or cut, summed over the process's threads, and the notes that
// say so in the profile: one sentence per cause, written where the figures are, so that the
// flush itself only collects and writes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/snapshot.hpp"
#include "core/thread_state.hpp"
#include "runtime/config.hpp"

namespace sonde {

struct SnapshotLosses {
  uint64_t overflows = 0;        // calls past SONDE_MAX_DEPTH
  uint64_t node_overflows = 0;   // calls past the call paths a thread can hold
  uint64_t abandoned = 0;        // calls a longjmp or an exception left
  uint64_t mismatches = 0;       // region ends that closed another region
  uint64_t dropped = 0;          // trace events dropped, by any cause
  uint64_t over_budget = 0;      // ... of them by SONDE_TRACE_MEMORY
  uint64_t unwritten = 0;        // ... of them by a flush that could not be written
  uint64_t untracked = 0;        // nonblocking requests beyond a thread's table
  uint64_t samples_dropped = 0;  // samples a full ring dropped

  void add(const ThreadSnapshot& s, const ThreadState& t);
};

// add_note's signature (Runtime::add_note): topic, message, whether to print it too, and for
// a count that replaces its earlier value the words every version holds (store.hpp's
// Note::count_of; empty: not a count).
using FlushNoteSink =
    std::function<void(const std::string&, const std::string&, bool, const std::string&)>;

// The notes of `l`, each a count first, kept up to date from flush to flush (one note of its
// latest value), with the limits named as the user set them, and `trace_loss_error` the error
// of a failed flush.
void note_losses(const SnapshotLosses& l, bool final, uint64_t sampler_faults, const Config& c,
                 const std::string& trace_loss_error, const FlushNoteSink& note);

}  // namespace sonde
