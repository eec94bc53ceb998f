// The counted threads' call paths as one tree: a node per row of the `callpaths` view (a path
// of routine ids below the thread roots, merged over the threads of counted_nodes and over
// processes), with the view's sums.
// The nodes are read once and merged in memory, children matched by routine id under each
// merged parent, as export_folded.cpp walks them. Reading the view itself built every path's
// string of ids in SQL and sorted on it: 73 s and 2 GB on the benchmark's 1M-node, 432-deep
// tree.
#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <vector>

#include "profile/call_tree.hpp"
#include "profile/counted_nodes.hpp"
#include "profile/node_links.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

constexpr std::uint32_t kNone = UINT32_MAX;

// The routines by index: what a node shows of each, and each one's place in the view's order
// of siblings (path_ids, whose last part is the routine id as text: "10" before "9").
struct Routines {
  std::vector<CallNodeFields> fields;
  std::vector<std::uint32_t> rank;
  std::unordered_map<std::int64_t, std::uint32_t> index;
};

Routines read_routines(const ProfileFile& file) {
  Routines r;
  for (auto& [id, fields] : load_routine_fields(file)) {
    r.index.emplace(id, static_cast<std::uint32_t>(r.fields.size()));
    r.fields.push_back(std::move(fields));
  }
  std::vector<std::pair<std::string, std::uint32_t>> keys;
  for (std::uint32_t i = 0; i < r.fields.size(); ++i)
    keys.emplace_back(std::to_string(r.fields[i].routine_id), i);
  std::sort(keys.begin(), keys.end());
  r.rank.resize(keys.size());
  for (std::uint32_t k = 0; k < keys.size(); ++k) r.rank[keys[k].second] = k;
  return r;
}

// Every node by node_id: its own figures (gpu_ns and graph_ns too: not yet its children's) and
// its children as one array (first_child[i] .. first_child[i + 1]).
struct Nodes {
  std::vector<std::uint32_t> routine;  // kNone: a routine the file does not list
  std::vector<std::int64_t> calls, subrs, incl_ns, excl_ns, gpu_ns, graph_ns;
  std::vector<double> flops;
  std::vector<std::uint32_t> first_child, children;
  std::vector<std::uint32_t> top;  // the children of nodes at depth 0 (node_paths' first rows)
};

// Adds each (node_id, ns) row of `sql` to that node's entry of `into`.
void add_by_node(const ProfileFile& file, const char* sql, const std::vector<std::int64_t>& id,
                 std::vector<std::int64_t>& into) {
  for (auto st = file.prepare(sql); st.step();) {
    auto at = std::lower_bound(id.begin(), id.end(), st.int64(0));
    if (at != id.end() && *at == st.int64(0)) into[at - id.begin()] += st.int64(1);
  }
}

Nodes read_nodes(const ProfileFile& file, const Routines& routines) {
  Nodes n;
  std::vector<std::int64_t> id, parent_id;
  std::vector<bool> at_depth_0, has_parent;
  auto st = file.prepare(
      "SELECT node_id, parent_id, routine_id, depth = 0, calls, subrs, incl_ns, excl_ns, flops "
      "FROM " +
      counted_nodes_table(file) + " ORDER BY node_id");
  while (st.step()) {
    id.push_back(st.int64(0));
    has_parent.push_back(!st.is_null(1));
    parent_id.push_back(st.is_null(1) ? 0 : st.int64(1));
    auto r = routines.index.find(st.int64(2));
    n.routine.push_back(r == routines.index.end() ? kNone : r->second);
    at_depth_0.push_back(st.int64(3) != 0);
    n.calls.push_back(st.int64(4));
    n.subrs.push_back(st.int64(5));
    n.incl_ns.push_back(st.int64(6));
    n.excl_ns.push_back(st.int64(7));
    n.flops.push_back(st.real(8));
  }
  n.gpu_ns.assign(id.size(), 0);
  n.graph_ns.assign(id.size(), 0);
  add_by_node(file,
              "SELECT node_id, SUM(ns) FROM gpu_activity_ns WHERE node_id IS NOT NULL "
              "GROUP BY node_id",
              id, n.gpu_ns);
  // Graph replays by the node their graph nodes were created at (gpu_graph_origins walks
  // gpu_activity: only asked when there is some).
  if (file.has_rows("gpu_activity"))
    add_by_node(file, "SELECT node_id, ns FROM gpu_graph_origins", id, n.graph_ns);

  NodeLinks links = link_nodes(id, has_parent, parent_id, at_depth_0);
  n.first_child = std::move(links.first_child);
  n.children = std::move(links.children);
  n.top = std::move(links.top);
  return n;
}

// The root: the threads' counted time (thread_times: the busy threads' lives, the waiting
// threads' calls), what no call of a busy thread covers as its own time.
CallNode merged_root(const ProfileFile& file) {
  CallNode root;
  root.name = SharedText("<thread>");
  root.kind = SharedText(kinds::kRoot);
  auto st = file.prepare(
      "SELECT COUNT(*), COALESCE(SUM(counted_s), 0), "
      "COALESCE(SUM(CASE WHEN busy THEN unmeasured_s ELSE 0 END), 0) FROM thread_times "
      "WHERE counted");
  if (st.step()) {
    root.calls = st.int64(0);
    root.incl_ns = std::llround(st.real(1) * 1e9);
    root.excl_ns = std::llround(st.real(2) * 1e9);
  }
  auto id = file.prepare("SELECT routine_id FROM routines WHERE kind = 'root' LIMIT 1");
  if (id.step()) root.routine_id = id.int64(0);
  return root;
}

}  // namespace

CallNode load_merged_tree(const ProfileFile& file) {
  Routines routines = read_routines(file);
  Nodes nodes = read_nodes(file, routines);
  CallNode root = merged_root(file);

  // A merged node and the nodes it merges, to be given its children. Its children vector is
  // filled whole before any of them is visited, so the pointers into it stay valid.
  struct Pending {
    CallNode* node;
    std::vector<std::uint32_t> members;
  };
  std::vector<Pending> todo;
  std::vector<std::pair<CallNode*, CallNode*>> made;  // (node, parent), parents first
  std::vector<std::uint32_t> found;
  // The nodes one step below `into`'s (a path below the roots, as node_paths: nodes of routines
  // the file lists, and theirs below them), grouped by routine in the view's order.
  auto add_children = [&](CallNode* into) {
    std::sort(found.begin(), found.end(), [&](std::uint32_t a, std::uint32_t b) {
      std::uint32_t ra = routines.rank[nodes.routine[a]], rb = routines.rank[nodes.routine[b]];
      return ra != rb ? ra < rb : a < b;
    });
    std::size_t groups = 0;
    for (std::size_t i = 0; i < found.size(); ++i)
      groups += i == 0 || nodes.routine[found[i]] != nodes.routine[found[i - 1]];
    into->children.reserve(groups);
    std::size_t first_pending = todo.size();
    for (std::size_t at = 0; at < found.size();) {
      std::uint32_t r = nodes.routine[found[at]];
      CallNode& child = into->children.emplace_back();
      static_cast<CallNodeFields&>(child) = routines.fields[r];
      Pending p{&child, {}};
      for (; at < found.size() && nodes.routine[found[at]] == r; ++at) {
        std::uint32_t m = found[at];
        child.calls += nodes.calls[m];
        child.subrs += nodes.subrs[m];
        child.incl_ns += nodes.incl_ns[m];
        child.excl_ns += nodes.excl_ns[m];
        child.flops += nodes.flops[m];
        child.gpu_ns += nodes.gpu_ns[m];
        child.graph_ns += nodes.graph_ns[m];
        p.members.push_back(m);
      }
      made.emplace_back(&child, into);
      todo.push_back(std::move(p));
    }
    std::reverse(todo.begin() + static_cast<std::ptrdiff_t>(first_pending), todo.end());
  };

  for (std::uint32_t i : nodes.top)
    if (nodes.routine[i] != kNone) found.push_back(i);
  add_children(&root);
  while (!todo.empty()) {
    Pending p = std::move(todo.back());
    todo.pop_back();
    found.clear();
    for (std::uint32_t m : p.members)
      for (std::uint32_t c = nodes.first_child[m]; c < nodes.first_child[m + 1]; ++c)
        if (nodes.routine[nodes.children[c]] != kNone) found.push_back(nodes.children[c]);
    add_children(p.node);
  }
  // GPU time becomes inclusive on the way up: children were made after their parents.
  for (auto it = made.rbegin(); it != made.rend(); ++it) {
    it->second->gpu_ns += it->first->gpu_ns;
    it->second->graph_ns += it->first->graph_ns;
  }
  for (const CallNode& child : root.children) root.subrs += child.calls;
  return root;
}

}  // namespace sonde::analyzers
