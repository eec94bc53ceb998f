// The calling-context tree loaded from the `nodes` table, per thread or merged over threads.
// Shared by `sonde tree` and the exporters.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "profile/profile_file.hpp"
#include "profile/shared_text.hpp"

namespace sonde::analyzers {

// A T on the heap, made on its first edit (none until then: get() gives an empty T); a copy
// copies the T.
template <typename T>
class Boxed {
 public:
  Boxed() = default;
  Boxed(const Boxed& other) : p_(other.p_ ? std::make_unique<T>(*other.p_) : nullptr) {}
  Boxed& operator=(const Boxed& other) {
    if (this != &other) p_ = other.p_ ? std::make_unique<T>(*other.p_) : nullptr;
    return *this;
  }
  Boxed(Boxed&&) noexcept = default;
  Boxed& operator=(Boxed&&) noexcept = default;

  const T& get() const {
    static const T none{};
    return p_ ? *p_ : none;
  }
  T& edit() {
    if (!p_) p_ = std::make_unique<T>();
    return *p_;
  }

 private:
  std::unique_ptr<T> p_;
};

// What a node holds besides its children: copied one node at a time (CallNode's copy).
struct CallNodeFields {
  std::int64_t routine_id = 0;  // what children are matched by: never the name alone
  // The nodes row (0 in a tree merged over threads); a thread whose writer split its root
  // keeps the rows merged into this one in rare.get().merged_node_ids, so that what refers to
  // a row (gpu_activity.node_id) still finds its node.
  std::int64_t node_id = 0;
  SharedText name;  // the routine's texts, one copy for all its nodes
  SharedText kind;
  SharedText file;         // routines.file: a Python frame's full path (framework entry points)
  SharedText where;        // "file:line", else the library, else ""
  bool generator = false;  // a Python generator function (routines.library 'generator')
  std::int64_t calls = 0;
  std::int64_t subrs = 0;
  std::int64_t incl_ns = 0;
  std::int64_t excl_ns = 0;
  double flops = 0;
  // GPU time (kernels, copies, memsets from gpu_activity) launched from this call path or
  // below it: device time, never part of the CPU times above.
  std::int64_t gpu_ns = 0;
  // Device time of CUDA graph replays whose graph nodes were created (captured) at this call
  // path or below it (gpu_graph_origins). The same work is in gpu_ns of the replaying call
  // (cudaGraphLaunch): the two are views of it, never added together.
  std::int64_t graph_ns = 0;
  // What few nodes hold, apart (8 bytes a node where it took 56: a tree of a million nodes).
  struct Rare {
    std::vector<std::int64_t> merged_node_ids;  // a split root's other rows
    // Children load_forest_above() left in the file (below its threshold): their number and
    // sums, which a renderer folds like the children it hides itself.
    struct Unloaded {
      std::int64_t count = 0, calls = 0, incl_ns = 0, excl_ns = 0;
    } unloaded;
  };
  Boxed<Rare> rare;
};

struct CallNode : CallNodeFields {
  std::vector<CallNode> children;  // in file order; sort_by_inclusive() for display

  CallNode() = default;
  CallNode(CallNode&&) noexcept = default;
  CallNode& operator=(CallNode&&) noexcept = default;
  // Copied and freed without recursion: a call path as deep as SONDE_MAX_DEPTH allows (65,536
  // frames) overflowed the stack in the implicit ones, as in every recursive walk.
  CallNode(const CallNode& other);
  CallNode& operator=(const CallNode& other);
  ~CallNode();
};

// Calls visit(node, depth) for `root` and every node below it, parents before children and
// children in order (depth 0: root), without recursion.
template <typename Node, typename Visit>
void for_each_node(Node& root, Visit&& visit) {
  std::vector<std::pair<Node*, int>> todo{{&root, 0}};
  while (!todo.empty()) {
    auto [node, depth] = todo.back();
    todo.pop_back();
    visit(*node, depth);
    for (auto it = node->children.rbegin(); it != node->children.rend(); ++it)
      todo.emplace_back(&*it, depth + 1);
  }
}

// Calls visit(node) for `root` and every node below it, children before their parent, without
// recursion: facts of subtrees computed bottom-up.
template <typename Node, typename Visit>
void for_each_node_bottom_up(Node& root, Visit&& visit) {
  std::vector<std::pair<Node*, bool>> todo{{&root, false}};
  while (!todo.empty()) {
    auto [node, children_done] = todo.back();
    todo.pop_back();
    if (!children_done) {
      todo.emplace_back(node, true);
      for (auto& child : node->children) todo.emplace_back(&child, false);
      continue;
    }
    visit(*node);
  }
}

struct ThreadTree {
  std::int64_t thread_id = 0;
  std::int64_t pid = 0;
  std::string process_command;
  std::int64_t seq = 0;
  std::int64_t tid = 0;
  std::string thread_name;
  // Earlier threads of the file with this pid and tid: an image that exec replaced (or a pid
  // used again), which viewers draw on the same track.
  std::int64_t earlier_on_track = 0;
  std::int64_t wall_ns = 0;  // thread end - start; the root's inclusive time while it runs
  bool waiting = false;      // waits for work most of its life (thread_times): its calls count
  // Its waits for work (thread_times.waited_s: the view waits), in no sum over threads.
  std::int64_t waited_ns = 0;
  CallNode root;
};

// One tree per thread that has a root node, ordered by process and thread sequence.
std::vector<ThreadTree> load_thread_trees(const ProfileFile& file);

// What `sonde tree` shows: the busy threads' trees (or, merged, one tree of the `callpaths`
// view's paths), and the idle threads apart (no measured call: in no percentage).
struct Forest {
  std::vector<ThreadTree> busy;  // empty when merged
  std::vector<ThreadTree> idle;
  bool merged = false;
  CallNode merged_root;  // when merged: <thread> over the busy threads, load_merged_tree's
};
Forest load_forest(const ProfileFile& file, bool merge_threads);

// The busy threads' trees (not merged) with only the nodes of at least min_pct % of their
// thread's root inclusive time: the rest stays in the file, summed per parent in `unloaded`.
// What a renderer with the same min_pct shows is the same as from load_forest, without building
// the nodes it would fold (a 1M-path tree: 76k nodes at 0.01 %). Falls back to load_forest where
// that is not so: GPU time (inclusive over the unloaded nodes too), a thread with split roots.
// With max_depth, nodes below that level are left in the file too (not summed: a renderer
// with the same max_depth shows nothing of them).
Forest load_forest_above(const ProfileFile& file, double min_pct,
                         std::optional<int> max_depth = std::nullopt);

// The busy threads' paths as one tree (profile/merged_tree.cpp): one node per row of the
// `callpaths` view (a path of routine ids, merged over threads and processes) with its figures,
// children in path_ids order, and `thread_times` for the root (the busy threads' time and what
// no call covers).
CallNode load_merged_tree(const ProfileFile& file);

// What a node shows of each routine of the file (name, kind, file, where, generator), by
// routine_id: read once per routine rather than once per node.
std::unordered_map<std::int64_t, CallNodeFields> load_routine_fields(const ProfileFile& file);

// True when any node of the trees launched GPU work (the file has gpu_activity rows).
bool has_gpu_time(const std::vector<ThreadTree>& trees);
// True when any node of the trees created CUDA graph nodes whose replays were recorded.
bool has_graph_time(const std::vector<ThreadTree>& trees);

// Children by inclusive time, largest first (ties by name), at every level.
void sort_by_inclusive(CallNode& node);
// That order: true when `a` comes before `b` (a stable sort by it is sort_by_inclusive's).
bool inclusive_first(const CallNode& a, const CallNode& b);

}  // namespace sonde::analyzers
