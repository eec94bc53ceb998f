// The parent-child links of a profile's `nodes` rows, read in node_id order, as index arrays:
// what the readers that walk every node once (the merged tree, the folded and csv exports) build
// instead of the callpaths view's path strings.
#pragma once

#include <cstdint>
#include <vector>

namespace sonde::analyzers {

inline constexpr std::uint32_t kNoNode = 0xffffffffu;

struct NodeLinks {
  // Node i's children (indexes into the rows, in node_id order) are
  // children[first_child[i]] .. children[first_child[i + 1] - 1].
  std::vector<std::uint32_t> first_child, children;
  std::vector<std::uint32_t> top;  // the children of the rows flagged `top_parent` (thread roots)
};

// `id` ascending (node_id); a row whose parent is absent, or names a node_id not among the rows
// (its parent was never written), is no one's child.
NodeLinks link_nodes(const std::vector<std::int64_t>& id, const std::vector<bool>& has_parent,
                     const std::vector<std::int64_t>& parent_id,
                     const std::vector<bool>& top_parent);

}  // namespace sonde::analyzers
