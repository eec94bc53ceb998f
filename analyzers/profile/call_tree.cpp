#include "profile/call_tree.hpp"

#include <algorithm>
#include <map>
#include <unordered_map>

namespace sonde::analyzers {
namespace {

struct FlatNode {
  CallNode data;
  std::vector<std::size_t> children;
};

// Links the tree below `index`; GPU time becomes inclusive on the way up.
CallNode build(std::vector<FlatNode>& flat, std::size_t index) {
  CallNode node = std::move(flat[index].data);
  node.children.reserve(flat[index].children.size());
  for (std::size_t child : flat[index].children) {
    node.children.push_back(build(flat, child));
    node.gpu_ns += node.children.back().gpu_ns;
  }
  return node;
}

void merge_into(CallNode& dst, const CallNode& src) {
  dst.calls += src.calls;
  dst.subrs += src.subrs;
  dst.incl_ns += src.incl_ns;
  dst.excl_ns += src.excl_ns;
  dst.flops += src.flops;
  dst.gpu_ns += src.gpu_ns;
  std::map<std::pair<std::string, std::string>, std::size_t> index;
  for (std::size_t i = 0; i < dst.children.size(); ++i)
    index.emplace(std::pair{dst.children[i].name, dst.children[i].kind}, i);
  for (const CallNode& child : src.children) {
    auto [it, inserted] = index.emplace(std::pair{child.name, child.kind}, dst.children.size());
    if (inserted) {
      CallNode empty;
      empty.name = child.name;
      empty.kind = child.kind;
      empty.file = child.file;
      dst.children.push_back(std::move(empty));
    }
    merge_into(dst.children[it->second], child);
  }
}

}  // namespace

std::vector<ThreadTree> load_thread_trees(const ProfileFile& file) {
  std::vector<ThreadTree> trees;
  std::unordered_map<std::int64_t, std::size_t> tree_of_thread;
  {
    auto st = file.prepare(
        "SELECT t.thread_id, p.pid, p.command, t.seq, t.tid, COALESCE(t.name, ''), "
        "       t.ended_ns - t.started_ns "
        "FROM threads t JOIN processes p USING (process_id) ORDER BY p.process_id, t.seq");
    while (st.step()) {
      ThreadTree t;
      t.thread_id = st.int64(0);
      t.pid = st.int64(1);
      t.process_command = st.text(2);
      t.seq = st.int64(3);
      t.tid = st.int64(4);
      t.thread_name = st.text(5);
      t.wall_ns = st.is_null(6) ? -1 : st.int64(6);
      tree_of_thread.emplace(t.thread_id, trees.size());
      trees.push_back(std::move(t));
    }
  }
  // Device time of the GPU work each call path launched (its own, not yet its children's).
  std::unordered_map<std::int64_t, std::int64_t> gpu_of_node;
  {
    auto st = file.prepare(
        "SELECT node_id, SUM(end_ns - start_ns) FROM gpu_activity "
        "WHERE node_id IS NOT NULL GROUP BY node_id");
    while (st.step()) gpu_of_node.emplace(st.int64(0), st.int64(1));
  }
  // Parents come before children when ordered by depth, so one pass links the whole tree.
  std::vector<FlatNode> flat;
  std::unordered_map<std::int64_t, std::size_t> index_of_node;
  std::vector<std::pair<std::size_t, std::size_t>> roots;  // (tree, flat index)
  auto st = file.prepare(
      "SELECT n.node_id, n.parent_id, n.thread_id, r.name, r.kind, n.calls, n.subrs, "
      "       n.incl_ns, n.excl_ns, n.flops, r.file "
      "FROM nodes n JOIN routines r USING (routine_id) ORDER BY n.depth, n.node_id");
  while (st.step()) {
    FlatNode f;
    f.data.name = st.text(3);
    f.data.kind = st.text(4);
    f.data.calls = st.int64(5);
    f.data.subrs = st.int64(6);
    f.data.incl_ns = st.int64(7);
    f.data.excl_ns = st.int64(8);
    f.data.flops = st.real(9);
    f.data.file = st.text(10);
    if (auto gpu = gpu_of_node.find(st.int64(0)); gpu != gpu_of_node.end()) {
      f.data.gpu_ns = gpu->second;
    }
    std::size_t index = flat.size();
    if (st.is_null(1)) {
      auto tree = tree_of_thread.find(st.int64(2));
      if (tree == tree_of_thread.end()) continue;  // a root of a thread the file does not list
      roots.emplace_back(tree->second, index);
    } else {
      auto parent = index_of_node.find(st.int64(1));
      if (parent == index_of_node.end()) continue;  // orphan: its parent was never written
      flat[parent->second].children.push_back(index);
    }
    index_of_node.emplace(st.int64(0), index);
    flat.push_back(std::move(f));
  }
  std::vector<bool> has_root(trees.size(), false);
  for (auto [tree, index] : roots) {
    CallNode root = build(flat, index);
    if (has_root[tree]) {
      merge_into(trees[tree].root, root);  // a writer that split a root: keep every number
    } else {
      trees[tree].root = std::move(root);
      has_root[tree] = true;
    }
  }
  std::vector<ThreadTree> out;
  for (std::size_t i = 0; i < trees.size(); ++i) {
    if (!has_root[i]) continue;
    if (trees[i].wall_ns < 0) trees[i].wall_ns = trees[i].root.incl_ns;
    out.push_back(std::move(trees[i]));
  }
  return out;
}

bool has_gpu_time(const std::vector<ThreadTree>& trees) {
  for (const auto& t : trees)
    if (t.root.gpu_ns > 0) return true;
  return false;
}

CallNode merge_trees(const std::vector<ThreadTree>& trees) {
  CallNode merged;
  merged.name = "<thread>";
  merged.kind = "root";
  for (const auto& t : trees) merge_into(merged, t.root);
  return merged;
}

void sort_by_inclusive(CallNode& node) {
  std::stable_sort(node.children.begin(), node.children.end(),
                   [](const CallNode& a, const CallNode& b) {
                     if (a.incl_ns != b.incl_ns) return a.incl_ns > b.incl_ns;
                     return a.name < b.name;
                   });
  for (auto& child : node.children) sort_by_inclusive(child);
}

}  // namespace sonde::analyzers
