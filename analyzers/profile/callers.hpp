// One routine's callers (the inverted, "bottom-up" tree) and callees (its subtrees merged): the
// figures of `sonde tree --callers` and the viewer's callers panel, defined here once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "profile/call_tree.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// A routine's callers and callees. Recursion: a node of the routine under another of it
// (nodes.recursive) is counted with its outermost occurrence, so its calls and exclusive time
// go up that occurrence's caller chain and inclusive time is counted once per outermost call,
// as the `hotspots` view counts it.
struct Sandwich {
  // The routine, its figures those of its `hotspots` row (calls, incl over the outermost
  // nodes, excl), with one child per calling routine: the calls and times of the routine that
  // came through that caller; beneath it the caller's callers, up to each thread's root
  // (<thread>). Each level's children sum to their parent, except where a chain reaches the
  // root. A routine is on a chain once, at its nearest occurrence (recursion among the
  // callers folded: rec <- rec <- main is rec <- main). Percentages are of the routine's
  // inclusive time (the root's incl_ns).
  CallNode callers;
  // The routine's outermost nodes merged, the calls below them matched by routine identity as
  // the merged tree matches them: the root carries those nodes' own figures (recursive calls
  // of the routine are its callees here).
  CallNode callees;
};

// What is made of a sandwich: the nodes of at least min_pct % of the routine's inclusive time,
// down to max_depth levels (as `sonde tree --min-pct --depth` show them), of the sides asked for
// (a side not asked for is its root alone).
struct SandwichOptions {
  double min_pct = 0.5;
  std::optional<int> max_depth;
  bool callers = true, callees = true;
};

// The nodes table loaded once (parents, routines, figures) and the routines' names, for any
// number of routines: `sonde view` asks for one routine after another.
class CallerIndex {
 public:
  explicit CallerIndex(const ProfileFile& file);
  ~CallerIndex();
  CallerIndex(CallerIndex&&) noexcept;
  CallerIndex& operator=(CallerIndex&&) noexcept;

  // Only the nodes a renderer with the same min_pct and max_depth shows are made (a routine
  // of the 1M-path benchmark file has millions of caller chains); the children below min_pct %
  // of the routine's inclusive time are summed in their parent's `unloaded`, and nothing is
  // made below max_depth. Throws Error (exit 2) for a routine no busy thread called.
  Sandwich sandwich(std::int64_t routine_id, const SandwichOptions& options) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One routine's, without keeping the index.
Sandwich compute_sandwich(const ProfileFile& file, std::int64_t routine_id,
                          const SandwichOptions& options);

}  // namespace sonde::analyzers
