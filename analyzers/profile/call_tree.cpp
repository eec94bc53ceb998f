#include "profile/call_tree.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <unordered_map>

#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

struct FlatNode {
  CallNode data;
  std::vector<std::size_t> children;
};

// Links every tree of `flat` at once, children first: a node's children come after it in `flat`
// (its parent is looked up as it is added), so a pass from the end finds them built. GPU time
// becomes inclusive on the way up. Linear in nodes, and no recursion (a 65,536-deep path).
std::vector<CallNode> build_all(std::vector<FlatNode>& flat) {
  std::vector<CallNode> built(flat.size());
  for (std::size_t i = flat.size(); i-- > 0;) {
    CallNode& node = built[i];
    static_cast<CallNodeFields&>(node) = std::move(flat[i].data);
    node.children.reserve(flat[i].children.size());
    for (std::size_t child : flat[i].children) {
      node.children.push_back(std::move(built[child]));
      node.gpu_ns += node.children.back().gpu_ns;
      node.graph_ns += node.children.back().graph_ns;
    }
  }
  return built;
}

// Adds `src`'s numbers into `dst`, path by path (children matched by routine id).
void merge_into(CallNode& dst, const CallNode& src) {
  // A pair's children are all added before any of theirs are visited: the pointers kept in
  // `todo` into a children vector stay valid once it has stopped growing.
  std::vector<std::pair<CallNode*, const CallNode*>> todo{{&dst, &src}};
  while (!todo.empty()) {
    auto [d, s] = todo.back();
    todo.pop_back();
    const std::vector<std::int64_t>& from = s->rare.get().merged_node_ids;
    if ((s->node_id != 0 && s->node_id != d->node_id) || !from.empty()) {
      std::vector<std::int64_t>& ids = d->rare.edit().merged_node_ids;
      if (s->node_id != 0 && s->node_id != d->node_id) ids.push_back(s->node_id);
      ids.insert(ids.end(), from.begin(), from.end());
    }
    d->calls += s->calls;
    d->subrs += s->subrs;
    d->incl_ns += s->incl_ns;
    d->excl_ns += s->excl_ns;
    d->flops += s->flops;
    d->gpu_ns += s->gpu_ns;
    d->graph_ns += s->graph_ns;
    std::map<std::int64_t, std::size_t> index;
    for (std::size_t i = 0; i < d->children.size(); ++i)
      index.emplace(d->children[i].routine_id, i);
    std::vector<std::size_t> into;
    for (const CallNode& child : s->children) {
      auto [it, inserted] = index.emplace(child.routine_id, d->children.size());
      if (inserted) {
        CallNode empty;
        empty.routine_id = child.routine_id;
        empty.name = child.name;
        empty.kind = child.kind;
        empty.file = child.file;
        empty.where = child.where;
        empty.generator = child.generator;
        d->children.push_back(std::move(empty));
      }
      into.push_back(it->second);
    }
    for (std::size_t i = s->children.size(); i-- > 0;)
      todo.emplace_back(&d->children[into[i]], &s->children[i]);
  }
}

SharedText where(const std::string& file, std::int64_t line, const std::string& library) {
  if (!file.empty()) return SharedText(fmt::format("{}:{}", file, line));
  return SharedText(library);
}

// The Python hook marks generator functions with the library "generator" (frames.cpp).
bool is_generator(std::string_view kind, std::string_view library) {
  return kind == kinds::kPython && library == kinds::kGeneratorLibrary;
}

// The nodes of every thread, parents before children; {0}: a join, {1}: a condition. Their
// routines' texts come from load_routine_fields, read once per routine.
constexpr const char* kNodeRows =
    "SELECT n.node_id, n.parent_id, n.thread_id, n.calls, n.subrs, n.incl_ns, n.excl_ns, "
    "       n.flops, n.routine_id "
    "FROM nodes n JOIN routines r USING (routine_id) {0} {1} ORDER BY n.depth, n.node_id";

using RoutineFields = std::unordered_map<std::int64_t, CallNodeFields>;

FlatNode node_row(Statement& st, const RoutineFields& routines) {
  FlatNode f;
  f.data.routine_id = st.int64(8);
  if (auto r = routines.find(f.data.routine_id); r != routines.end())
    static_cast<CallNodeFields&>(f.data) = r->second;
  f.data.node_id = st.int64(0);
  f.data.calls = st.int64(3);
  f.data.subrs = st.int64(4);
  f.data.incl_ns = st.int64(5);
  f.data.excl_ns = st.int64(6);
  f.data.flops = st.real(7);
  return f;
}

// Each node's share of its thread's root as render/tree.cpp's pct() computes it (100.0 * part /
// total in doubles, none when the total is 0), so the same nodes pass the same threshold.
constexpr const char* kRootJoin =
    "JOIN (SELECT thread_id, incl_ns AS total FROM nodes WHERE parent_id IS NULL) t "
    "USING (thread_id)";
std::string above(double min_pct) {
  return fmt::format("(t.total > 0 AND 100.0 * n.incl_ns / t.total >= {:.17g})", min_pct);
}

// Every thread of the file, without its tree; wall_ns -1 where it has no end.
std::vector<ThreadTree> load_thread_list(const ProfileFile& file) {
  std::vector<ThreadTree> trees;
  auto st = file.prepare(
      "SELECT t.thread_id, p.pid, p.command, t.seq, t.tid, COALESCE(t.name, ''), "
      "       t.ended_ns - t.started_ns, COALESCE(tt.waiting, 0), COALESCE(tt.waited_s, 0) "
      "FROM threads t JOIN processes p USING (process_id) "
      "LEFT JOIN thread_times tt USING (thread_id) "
      "ORDER BY p.started_ns, p.process_id, t.seq");
  std::map<std::pair<std::int64_t, std::int64_t>, std::int64_t> on_track;
  while (st.step()) {
    ThreadTree t;
    t.thread_id = st.int64(0);
    t.pid = st.int64(1);
    t.process_command = st.text(2);
    t.seq = st.int64(3);
    t.tid = st.int64(4);
    t.thread_name = st.text(5);
    t.wall_ns = st.is_null(6) ? -1 : st.int64(6);
    t.waiting = st.int64(7) != 0;
    t.waited_ns = std::llround(st.real(8) * 1e9);
    t.earlier_on_track = on_track[{t.pid, t.tid}]++;
    trees.push_back(std::move(t));
  }
  return trees;
}

// Every read between its making and its end sees one state of the file, though a running
// program's flush writes it meanwhile (a savepoint: inside a reader's own transaction too).
class ReadSnapshot {
 public:
  explicit ReadSnapshot(const ProfileFile& file) : file_(file) {
    file_.exec("SAVEPOINT sonde_read_snapshot");
  }
  ~ReadSnapshot() {
    try {
      file_.exec("RELEASE sonde_read_snapshot");
    } catch (...) {  // nothing was written: nothing to lose
    }
  }
  ReadSnapshot(const ReadSnapshot&) = delete;
  ReadSnapshot& operator=(const ReadSnapshot&) = delete;

 private:
  const ProfileFile& file_;
};

}  // namespace

std::unordered_map<std::int64_t, CallNodeFields> load_routine_fields(const ProfileFile& file) {
  std::unordered_map<std::int64_t, CallNodeFields> routines;
  for (auto st = file.prepare("SELECT routine_id, name, kind, file, line, library FROM routines");
       st.step();) {
    CallNodeFields& r = routines[st.int64(0)];
    r.routine_id = st.int64(0);
    r.name = SharedText(st.text(1));
    r.kind = SharedText(st.text(2));
    r.file = SharedText(st.text(3));
    r.where = where(st.text(3), st.int64(4), st.text(5));
    r.generator = is_generator(r.kind, st.text(5));
  }
  return routines;
}

std::vector<ThreadTree> load_thread_trees(const ProfileFile& file) {
  ReadSnapshot snapshot(file);
  std::vector<ThreadTree> trees = load_thread_list(file);
  std::unordered_map<std::int64_t, std::size_t> tree_of_thread;
  for (std::size_t i = 0; i < trees.size(); ++i) tree_of_thread.emplace(trees[i].thread_id, i);
  // Device time of the GPU work each call path launched (its own, not yet its children's).
  std::unordered_map<std::int64_t, std::int64_t> gpu_of_node;
  {
    auto st = file.prepare(
        "SELECT node_id, SUM(ns) FROM gpu_activity_ns "
        "WHERE node_id IS NOT NULL GROUP BY node_id");
    while (st.step()) gpu_of_node.emplace(st.int64(0), st.int64(1));
  }
  std::unordered_map<std::int64_t, std::int64_t> graph_of_node;
  for (auto st = file.prepare("SELECT node_id, ns FROM gpu_graph_origins"); st.step();)
    graph_of_node.emplace(st.int64(0), st.int64(1));
  std::unordered_map<std::int64_t, CallNodeFields> routines = load_routine_fields(file);
  // The rows' shape first, without strings or figures, in node_id order (the table's own: no
  // sort in SQL); then the tree is built from the top, parents before children as ORDER BY
  // depth, node_id would give them, into children vectors of the right size; then the figures
  // are read into the nodes, a second pass in the same order. Built from the bottom, every node
  // was held twice on the way (1 GB for the benchmark's 1M nodes); with the figures in the
  // rows, 48 MB more at the peak.
  struct Row {
    std::int64_t node_id, parent_id, thread_id;
    const CallNodeFields* routine;  // null: a routine the file does not list (the join's)
    std::int32_t depth;
    bool root;
  };
  std::vector<Row> rows;
  for (auto st = file.prepare(
           "SELECT node_id, parent_id, thread_id, routine_id, depth FROM nodes ORDER BY node_id");
       st.step();) {
    auto routine = routines.find(st.int64(3));
    rows.push_back({st.int64(0), st.is_null(1) ? 0 : st.int64(1), st.int64(2),
                    routine == routines.end() ? nullptr : &routine->second,
                    static_cast<std::int32_t>(st.int64(4)), st.is_null(1)});
  }
  // By depth, then node_id: a counting sort of the rows' indices.
  std::vector<std::size_t> order(rows.size());
  {
    std::int32_t low = 0, high = -1;
    for (const Row& r : rows) {
      low = std::min(low, r.depth);
      high = std::max(high, r.depth);
    }
    std::vector<std::size_t> at(rows.empty() ? 1 : static_cast<std::size_t>(high - low + 2), 0);
    for (const Row& r : rows) ++at[static_cast<std::size_t>(r.depth - low + 1)];
    for (std::size_t d = 1; d < at.size(); ++d) at[d] += at[d - 1];
    for (std::size_t i = 0; i < rows.size(); ++i)
      order[at[static_cast<std::size_t>(rows[i].depth - low)]++] = i;
  }
  // Which rows make a node (by the same tests, in the same order, as the rows were read
  // before), each one's parent row and its number of children.
  constexpr std::size_t kLeftOut = SIZE_MAX;
  // The row of a node id: its offset where the ids run without a gap (as a writer numbers
  // them), else a binary search (the lookups' cache misses were a tenth of view --html).
  const bool dense = rows.empty() || rows.back().node_id - rows.front().node_id + 1 ==
                                         static_cast<std::int64_t>(rows.size());
  auto row_of = [&](std::int64_t id) -> std::size_t {
    if (rows.empty()) return kLeftOut;
    if (dense) {
      std::int64_t at = id - rows.front().node_id;
      return at >= 0 && at < static_cast<std::int64_t>(rows.size()) ? std::size_t(at) : kLeftOut;
    }
    auto p = std::lower_bound(rows.begin(), rows.end(), id,
                              [](const Row& r, std::int64_t v) { return r.node_id < v; });
    return p == rows.end() || p->node_id != id ? kLeftOut : std::size_t(p - rows.begin());
  };
  std::vector<std::size_t> parent(rows.size(), kLeftOut), children(rows.size(), 0);
  std::vector<bool> made(rows.size(), false);
  std::size_t root_count = 0;
  for (std::size_t i : order) {
    const Row& row = rows[i];
    if (row.routine == nullptr) continue;  // as the join with routines leaves it out
    if (row.root) {
      auto tree = tree_of_thread.find(row.thread_id);
      if (tree == tree_of_thread.end()) continue;  // a root of a thread the file does not list
      parent[i] = tree->second;
      ++root_count;
    } else {
      std::size_t pi = row_of(row.parent_id);
      if (pi == kLeftOut) continue;  // never written: an orphan
      if (!made[pi]) continue;       // below a node left out, or not above it by depth
      parent[i] = pi;
      ++children[pi];
    }
    made[i] = true;
  }
  std::vector<CallNode> roots;
  roots.reserve(root_count);  // no reallocation: the nodes' addresses are kept below
  std::vector<CallNode*> node_of(rows.size(), nullptr);
  std::vector<std::pair<std::size_t, std::size_t>> root_of;  // (tree, index in roots)
  for (std::size_t i : order) {
    if (!made[i]) continue;
    const Row& row = rows[i];
    if (row.root) root_of.emplace_back(parent[i], roots.size());
    std::vector<CallNode>& into = row.root ? roots : node_of[parent[i]]->children;
    CallNode& n = into.emplace_back();
    static_cast<CallNodeFields&>(n) = *row.routine;
    n.node_id = row.node_id;
    if (auto gpu = gpu_of_node.find(row.node_id); gpu != gpu_of_node.end()) n.gpu_ns = gpu->second;
    if (auto graph = graph_of_node.find(row.node_id); graph != graph_of_node.end())
      n.graph_ns = graph->second;
    n.children.reserve(children[i]);
    node_of[i] = &n;
  }
  // The figures, row by row in the same order (a row the first pass did not see, written
  // since, is skipped; the snapshot below keeps both passes on one state of the file).
  {
    std::size_t i = 0;
    for (auto st = file.prepare(
             "SELECT node_id, calls, subrs, incl_ns, excl_ns, flops FROM nodes ORDER BY node_id");
         st.step();) {
      std::int64_t id = st.int64(0);
      while (i < rows.size() && rows[i].node_id < id) ++i;
      if (i == rows.size()) break;
      if (rows[i].node_id != id || !made[i]) continue;
      CallNode& n = *node_of[i];
      n.calls = st.int64(1);
      n.subrs = st.int64(2);
      n.incl_ns = st.int64(3);
      n.excl_ns = st.int64(4);
      n.flops = st.real(5);
    }
  }
  // GPU time becomes inclusive on the way up: children come after their parents.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (!made[*it] || rows[*it].root) continue;
    node_of[parent[*it]]->gpu_ns += node_of[*it]->gpu_ns;
    node_of[parent[*it]]->graph_ns += node_of[*it]->graph_ns;
  }
  std::vector<bool> has_root(trees.size(), false);
  for (auto [tree, index] : root_of) {
    CallNode& root = roots[index];
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

bool has_graph_time(const std::vector<ThreadTree>& trees) {
  for (const auto& t : trees)
    if (t.root.graph_ns > 0) return true;
  return false;
}

Forest load_forest(const ProfileFile& file, bool merge_threads) {
  Forest f;
  // Merged, the busy threads' own trees are let go before the merged tree is loaded: nothing
  // shows them, and held beside it they doubled the peak (1M nodes: 2 GB).
  for (ThreadTree& t : load_thread_trees(file)) {
    if (t.root.children.empty())
      f.idle.push_back(std::move(t));
    else if (!merge_threads)
      f.busy.push_back(std::move(t));
  }
  if (merge_threads) {
    f.merged = true;
    f.merged_root = load_merged_tree(file);
  }
  return f;
}

Forest load_forest_above(const ProfileFile& file, double min_pct, std::optional<int> max_depth) {
  bool one_root_each = false;
  if (auto st = file.prepare("SELECT COUNT(*) = COUNT(DISTINCT thread_id) FROM nodes "
                             "WHERE parent_id IS NULL");
      st.step())
    one_root_each = st.int64(0) != 0;
  if (min_pct <= 0 || !one_root_each || file.has_rows("gpu_activity"))
    return load_forest(file, false);

  std::vector<ThreadTree> trees = load_thread_list(file);
  std::unordered_map<std::int64_t, std::size_t> tree_of_thread;
  for (std::size_t i = 0; i < trees.size(); ++i) tree_of_thread.emplace(trees[i].thread_id, i);
  std::vector<FlatNode> flat;
  std::unordered_map<std::int64_t, std::size_t> index_of_node;
  std::vector<std::pair<std::size_t, std::size_t>> roots;
  // Per node shown: its id, level and thread's total, for the look-ups of its hidden children.
  struct Shown {
    std::int64_t node_id;
    int depth;
    std::int64_t total;
  };
  std::vector<Shown> shown_nodes;
  std::string shown = "(n.parent_id IS NULL OR " + above(min_pct) + ")";
  if (max_depth) shown += fmt::format(" AND n.depth <= {}", *max_depth);
  const RoutineFields routines = load_routine_fields(file);
  auto st = file.prepare(fmt::format(fmt::runtime(kNodeRows), kRootJoin, "WHERE " + shown));
  while (st.step()) {
    FlatNode f = node_row(st, routines);
    std::size_t index = flat.size();
    Shown s{st.int64(0), 0, f.data.incl_ns};
    if (st.is_null(1)) {
      auto tree = tree_of_thread.find(st.int64(2));
      if (tree == tree_of_thread.end()) continue;
      roots.emplace_back(tree->second, index);
    } else {
      auto parent = index_of_node.find(st.int64(1));
      if (parent == index_of_node.end()) continue;  // under a node below the threshold
      flat[parent->second].children.push_back(index);
      s.depth = shown_nodes[parent->second].depth + 1;
      s.total = shown_nodes[parent->second].total;
    }
    index_of_node.emplace(st.int64(0), index);
    flat.push_back(std::move(f));
    shown_nodes.push_back(s);
  }
  // What a renderer folds under a node it shows: its children below the threshold, found by
  // their parents (the index on parent_id) rather than by scanning every node.
  auto fold = [&](std::size_t index, std::int64_t calls, std::int64_t incl, std::int64_t excl) {
    CallNode::Rare::Unloaded& u = flat[index].data.rare.edit().unloaded;
    ++u.count;
    u.calls += calls;
    u.incl_ns += incl;
    u.excl_ns += excl;
  };
  if (max_depth) {
    // The first levels only (the viewer's first tree: thousands of nodes of a million): each
    // one's children looked up by the index, not a second scan of every node (0.27 -> 0.03 s
    // on the 1M-path benchmark). None below max_depth: a renderer shows nothing of them.
    auto kids = file.prepare("SELECT calls, incl_ns, excl_ns FROM nodes WHERE parent_id = ?1");
    for (std::size_t i = 0; i < shown_nodes.size(); ++i) {
      if (shown_nodes[i].depth >= *max_depth) continue;
      double total = static_cast<double>(shown_nodes[i].total);
      kids.bind(1, shown_nodes[i].node_id);
      while (kids.step()) {
        // the test of above(), in the same doubles
        bool is_shown = total > 0 && 100.0 * static_cast<double>(kids.int64(1)) / total >= min_pct;
        if (!is_shown) fold(i, kids.int64(0), kids.int64(1), kids.int64(2));
      }
    }
  } else {
    auto rest = file.prepare(
        fmt::format("WITH shown AS (SELECT n.node_id, t.total FROM nodes n {0} WHERE {2}) "
                    "SELECT n.parent_id, n.calls, n.incl_ns, n.excl_ns "
                    "FROM shown t JOIN nodes n ON n.parent_id = t.node_id WHERE NOT {1}",
                    kRootJoin, above(min_pct), shown));
    while (rest.step()) {
      auto parent = index_of_node.find(rest.int64(0));
      if (parent != index_of_node.end())
        fold(parent->second, rest.int64(1), rest.int64(2), rest.int64(3));
    }
  }
  Forest f;
  std::vector<CallNode> built = build_all(flat);
  for (auto [tree, index] : roots) trees[tree].root = std::move(built[index]);
  std::vector<bool> has_root(trees.size(), false);
  for (auto [tree, index] : roots) has_root[tree] = true;
  for (std::size_t i = 0; i < trees.size(); ++i) {
    if (!has_root[i]) continue;
    ThreadTree& t = trees[i];
    if (t.wall_ns < 0) t.wall_ns = t.root.incl_ns;
    bool idle = t.root.children.empty() && t.root.rare.get().unloaded.count == 0;
    (idle ? f.idle : f.busy).push_back(std::move(t));
  }
  return f;
}

bool inclusive_first(const CallNode& a, const CallNode& b) {
  if (a.incl_ns != b.incl_ns) return a.incl_ns > b.incl_ns;
  if (a.name != b.name) return a.name < b.name;
  return a.routine_id < b.routine_id;
}

void sort_by_inclusive(CallNode& root) {
  // Parents first: a node's children are sorted before they are visited.
  for_each_node(root, [](CallNode& node, int) {
    std::stable_sort(node.children.begin(), node.children.end(), inclusive_first);
  });
}

CallNode::CallNode(const CallNode& other) : CallNodeFields(other) {
  // Each node's children are copied whole (their own children empty) before any is visited,
  // so the pointers kept in `todo` stay valid.
  std::vector<std::pair<const CallNode*, CallNode*>> todo{{&other, this}};
  while (!todo.empty()) {
    auto [src, dst] = todo.back();
    todo.pop_back();
    dst->children.resize(src->children.size());
    for (std::size_t i = 0; i < src->children.size(); ++i) {
      static_cast<CallNodeFields&>(dst->children[i]) = src->children[i];
      todo.emplace_back(&src->children[i], &dst->children[i]);
    }
  }
}

CallNode& CallNode::operator=(const CallNode& other) {
  if (this != &other) *this = CallNode(other);
  return *this;
}

CallNode::~CallNode() {
  // The descendants are taken out one at a time, each with no children left when it is freed.
  std::vector<CallNode> pending = std::move(children);
  while (!pending.empty()) {
    CallNode last = std::move(pending.back());
    pending.pop_back();
    for (CallNode& child : last.children) pending.push_back(std::move(child));
    last.children.clear();
  }
}

}  // namespace sonde::analyzers
