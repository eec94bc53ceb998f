// The flame graph's trees besides each thread's and all threads merged: one merged tree per rank
// of a merged MPI file and one per process, each the tree `sonde tree --rank R --threads merge`
// prints for a rank (its processes copied apart by ProfileFile::open_processes, then the same
// load_forest and render_tree_json), so the viewer aggregates nothing of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// Ranks, and processes, listed at most: each is a tree of its own in an --html file, and a
// selector of a thousand entries is no help (`sonde tree --rank R` reads any rank).
inline constexpr std::size_t kViewScopesMax = 64;

// A rank or a process the page offers a merged tree of.
struct TreeScope {
  std::string part;                     // the bundle member with its tree
  std::vector<std::int64_t> processes;  // the process_ids it merges
  Json entry;                           // what the page lists: kind, rank or pid, threads, time
};

// Each rank where the file holds two or more, then each process (a pid within a rank: an exec'd
// image is the process it replaced) with a busy thread where two or more have one. A process
// that is all of its rank shares the rank's part.
struct TreeScopes {
  std::vector<TreeScope> scopes;
  std::int64_t ranks = 0, processes = 0;  // how many there are, listed or not
};
TreeScopes list_tree_scopes(const ProfileFile& file);

// {"ranks", "processes", "max", "scopes": [entry...]}: the part "tree_scopes".
Json tree_scopes_json(const TreeScopes& scopes);

// The scope's processes' busy threads merged into one tree, as `sonde tree --threads merge
// --min-pct min_pct --format json` prints it for a file of those processes alone.
Json scope_tree_json(const ProfileFile& file, const TreeScope& scope, double min_pct);

// `after`'s busy threads merged (the tree of "tree_merged", at min_pct), each node coloured by the
// change of its path's share against `before`'s (metrics/share_change.hpp, as `sonde export
// --format svg --baseline` draws it): {"baseline", "total_s", "baseline_total_s", "legend":
// [{label, fill}], "min_pct", "max_depth", "threads", "denominator", "tree"}, each node of the
// tree with "before_pct" (null: a path the baseline lacks), "after_pct", "change_pct" (% of the
// baseline's share; null where new) and "fill".
Json diff_tree_json(const ProfileFile& after, const ProfileFile& before,
                    const std::string& before_name, double min_pct);

}  // namespace sonde::analyzers
