#include "profile/node_links.hpp"

#include <algorithm>
#include <numeric>

namespace sonde::analyzers {

NodeLinks link_nodes(const std::vector<std::int64_t>& id, const std::vector<bool>& has_parent,
                     const std::vector<std::int64_t>& parent_id,
                     const std::vector<bool>& top_parent) {
  NodeLinks n;
  std::vector<std::uint32_t> parent(id.size(), kNoNode);
  n.first_child.assign(id.size() + 1, 0);
  for (std::size_t i = 0; i < id.size(); ++i) {
    if (!has_parent[i]) continue;
    auto at = std::lower_bound(id.begin(), id.end(), parent_id[i]);
    if (at == id.end() || *at != parent_id[i]) continue;  // its parent was never written
    parent[i] = static_cast<std::uint32_t>(at - id.begin());
    ++n.first_child[parent[i] + 1];
  }
  std::partial_sum(n.first_child.begin(), n.first_child.end(), n.first_child.begin());
  n.children.resize(n.first_child.back());
  std::vector<std::uint32_t> filled(n.first_child.begin(), n.first_child.end() - 1);
  for (std::uint32_t i = 0; i < id.size(); ++i) {
    if (parent[i] == kNoNode) continue;
    n.children[filled[parent[i]]++] = i;
    if (top_parent[parent[i]]) n.top.push_back(i);
  }
  return n;
}

}  // namespace sonde::analyzers
