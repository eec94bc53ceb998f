// A differential flame graph's figure: each call path's share of the busy threads' time in one
// profile against its share in a baseline. `sonde export --format svg --baseline` draws it and
// `sonde view` carries it to the page (view/view_trees.hpp): this is its one definition.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "profile/call_tree.hpp"

namespace sonde::analyzers {

// One path's two shares, as fractions of each tree's root inclusive time.
struct PathShare {
  double before = 0;  // 0: the baseline has no such path (or spent no time on it)
  double after = 0;
  bool is_new() const { return before <= 0; }
  // (after - before) / before: +1 is twice the baseline's share; none for a new path.
  std::optional<double> change() const;
};

// The shares of every node of `after` against `before`, paths matched by their frames' names
// (two profiles share no routine ids): a node's baseline share sums the baseline's nodes whose
// names from the root down are the same, two routines of one display name included. Both roots
// stand for the busy threads and match whatever their names. The walk goes down both trees
// together, each level's children matched through a hash of names, so it costs O(nodes), not
// a key of every path's names (a 384-deep 1M-path tree's keys alone were gigabytes).
class PathShares {
 public:
  // Looked up by address: `after` is neither moved nor re-sorted while this is used.
  PathShares(const CallNode& after, const CallNode& before);
  PathShare of(const CallNode& node) const;
  double after_total_ns() const { return after_total_; }
  double before_total_ns() const { return before_total_; }

 private:
  double after_total_, before_total_;
  std::unordered_map<const CallNode*, double> before_;  // nodes the baseline has
};

// Red where the share grew, blue where it shrank, near white where it held: the depth is the
// share's ratio on a log scale, full at twice or half the baseline's, and full red for a new
// path. An hsl() that SVG and canvas both read.
std::string share_change_fill(const PathShare& share);

// What the colours mean, grown first: {label, fill}.
struct ShareChangeKey {
  std::string label, fill;
};
std::vector<ShareChangeKey> share_change_legend();

}  // namespace sonde::analyzers
