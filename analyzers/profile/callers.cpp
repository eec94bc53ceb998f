#include "profile/callers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace sonde::analyzers {
namespace {

struct RoutineInfo {
  std::string name, kind, file, where;
  bool generator = false;
};

// A routine's `hotspots` row: the figures the callers tree starts from.
struct Totals {
  std::int64_t calls = 0, subrs = 0, incl_ns = 0, excl_ns = 0;
};

std::int64_t to_ns(double seconds) { return std::llround(seconds * 1e9); }

// A tree built node by node, children found by routine id; parents come before their children.
class Trie {
 public:
  explicit Trie(std::int64_t root_routine) { nodes_.emplace_back(root_routine); }

  std::size_t child(std::size_t parent, std::int64_t routine_id) {
    auto [it, added] = index_.try_emplace(key(parent, routine_id), nodes_.size());
    if (added) {
      nodes_[parent].children.push_back(nodes_.size());
      nodes_.emplace_back(routine_id);
    }
    return it->second;
  }
  CallNodeFields& at(std::size_t i) { return nodes_[i].data; }

  // Linked from the end, so that a node's children are built before it is: no recursion.
  CallNode build(const std::unordered_map<std::int64_t, RoutineInfo>& routines) {
    std::vector<CallNode> built(nodes_.size());
    for (std::size_t i = nodes_.size(); i-- > 0;) {
      CallNode& node = built[i];
      static_cast<CallNodeFields&>(node) = std::move(nodes_[i].data);
      if (auto r = routines.find(node.routine_id); r != routines.end()) {
        node.name = r->second.name;
        node.kind = r->second.kind;
        node.file = r->second.file;
        node.where = r->second.where;
        node.generator = r->second.generator;
      }
      for (std::size_t c : nodes_[i].children) node.children.push_back(std::move(built[c]));
    }
    return std::move(built[0]);
  }

 private:
  struct Node {
    explicit Node(std::int64_t routine_id) { data.routine_id = routine_id; }
    CallNodeFields data;
    std::vector<std::size_t> children;
  };
  static std::pair<std::size_t, std::int64_t> key(std::size_t p, std::int64_t r) { return {p, r}; }
  struct Hash {
    std::size_t operator()(const std::pair<std::size_t, std::int64_t>& k) const {
      return std::hash<std::size_t>()(k.first * 1000003u) ^ std::hash<std::int64_t>()(k.second);
    }
  };
  std::vector<Node> nodes_;
  std::unordered_map<std::pair<std::size_t, std::int64_t>, std::size_t, Hash> index_;
};

void add(CallNodeFields& to, std::int64_t calls, std::int64_t subrs, std::int64_t incl,
         std::int64_t excl) {
  to.calls += calls;
  to.subrs += subrs;
  to.incl_ns += incl;
  to.excl_ns += excl;
}

}  // namespace

struct CallerIndex::Impl {
  // Nodes by index in node_id order; parent -1 at a thread's root.
  std::vector<std::int32_t> parent;
  std::vector<std::int64_t> routine;
  std::vector<std::uint8_t> recursive;
  std::vector<std::int64_t> calls, subrs, incl_ns, excl_ns;
  // Children of node i: child_list[child_start[i] .. child_start[i + 1]).
  std::vector<std::uint32_t> child_start, child_list;
  std::unordered_map<std::int64_t, std::vector<std::uint32_t>> nodes_of;
  std::unordered_map<std::int64_t, RoutineInfo> routines;
  std::unordered_map<std::int64_t, Totals> totals;  // the hotspots view, by routine id
};

CallerIndex::CallerIndex(const ProfileFile& file) : impl_(std::make_unique<Impl>()) {
  Impl& x = *impl_;
  std::vector<std::int64_t> ids, parent_ids;
  {
    // In rowid order: ids come sorted, so a parent is found by binary search.
    auto st = file.prepare(
        "SELECT node_id, parent_id, routine_id, recursive, calls, subrs, incl_ns, excl_ns "
        "FROM nodes ORDER BY node_id");
    while (st.step()) {
      ids.push_back(st.int64(0));
      parent_ids.push_back(st.is_null(1) ? -1 : st.int64(1));
      x.routine.push_back(st.int64(2));
      x.recursive.push_back(st.int64(3) != 0);
      x.calls.push_back(st.int64(4));
      x.subrs.push_back(st.int64(5));
      x.incl_ns.push_back(st.int64(6));
      x.excl_ns.push_back(st.int64(7));
    }
  }
  std::size_t n = ids.size();
  x.parent.assign(n, -1);
  x.child_start.assign(n + 1, 0);
  for (std::size_t i = 0; i < n; ++i) {
    if (parent_ids[i] < 0) continue;
    auto it = std::lower_bound(ids.begin(), ids.end(), parent_ids[i]);
    if (it == ids.end() || *it != parent_ids[i]) continue;  // a dangling parent: a root here
    x.parent[i] = static_cast<std::int32_t>(it - ids.begin());
    ++x.child_start[x.parent[i] + 1];
  }
  for (std::size_t i = 0; i < n; ++i) x.child_start[i + 1] += x.child_start[i];
  x.child_list.resize(x.child_start[n]);
  std::vector<std::uint32_t> next(x.child_start.begin(), x.child_start.end() - 1);
  for (std::size_t i = 0; i < n; ++i) {
    if (x.parent[i] >= 0) x.child_list[next[x.parent[i]]++] = static_cast<std::uint32_t>(i);
    x.nodes_of[x.routine[i]].push_back(static_cast<std::uint32_t>(i));
  }
  for (auto st = file.prepare("SELECT routine_id, name, kind, file, line, library FROM routines");
       st.step();) {
    RoutineInfo r{st.text(1), st.text(2), st.text(3), ""};
    std::string library = st.text(5);
    r.where = r.file.empty() ? library : fmt::format("{}:{}", r.file, st.int64(4));
    r.generator = r.kind == "python" && library == "generator";
    x.routines.emplace(st.int64(0), std::move(r));
  }
  for (auto st = file.prepare("SELECT routine_id, calls, subrs, incl_s, excl_s FROM hotspots");
       st.step();)
    x.totals.emplace(st.int64(0),
                     Totals{st.int64(1), st.int64(2), to_ns(st.real(3)), to_ns(st.real(4))});
}

CallerIndex::~CallerIndex() = default;
CallerIndex::CallerIndex(CallerIndex&&) noexcept = default;
CallerIndex& CallerIndex::operator=(CallerIndex&&) noexcept = default;

Sandwich CallerIndex::sandwich(std::int64_t routine_id) const {
  const Impl& x = *impl_;
  auto total = x.totals.find(routine_id);
  auto info = x.routines.find(routine_id);
  auto nodes = x.nodes_of.find(routine_id);
  if (total == x.totals.end() || info == x.routines.end() || nodes == x.nodes_of.end())
    throw Error(fmt::format("routine {} was not called by a busy thread", routine_id), 2);
  if (info->second.kind == "root")
    throw Error(fmt::format("{} is each thread's root: nothing calls it (sonde tree shows what "
                            "it calls)",
                            info->second.name),
                2);
  Trie callers(routine_id), callees(routine_id);
  // Each outermost node's subtree, walked on a stack: its callees merged, and the routine's
  // recursive nodes in it counted with it. Outermost nodes' subtrees never overlap.
  std::vector<std::pair<std::uint32_t, std::size_t>> todo;  // node, its callee trie node
  std::unordered_set<std::int64_t> on_chain;
  for (std::uint32_t outer : nodes->second) {
    if (x.recursive[outer]) continue;
    std::int64_t calls = x.calls[outer], excl = x.excl_ns[outer];
    add(callees.at(0), x.calls[outer], x.subrs[outer], x.incl_ns[outer], x.excl_ns[outer]);
    todo.assign(1, {outer, 0});
    while (!todo.empty()) {
      auto [node, at] = todo.back();
      todo.pop_back();
      for (std::uint32_t k = x.child_start[node]; k < x.child_start[node + 1]; ++k) {
        std::uint32_t c = x.child_list[k];
        if (x.routine[c] == routine_id) {
          calls += x.calls[c];
          excl += x.excl_ns[c];
        }
        std::size_t t = callees.child(at, x.routine[c]);
        add(callees.at(t), x.calls[c], x.subrs[c], x.incl_ns[c], x.excl_ns[c]);
        todo.emplace_back(c, t);
      }
    }
    // Up the outermost node's callers to its thread's root, each carrying what came through.
    // A caller already on the chain is not shown again (rec <- rec <- main: rec <- main), so
    // recursion among the callers keeps the tree as deep as the distinct routines above.
    std::size_t at = 0;
    on_chain.clear();
    for (std::int32_t up = x.parent[outer]; up >= 0; up = x.parent[up]) {
      if (!on_chain.insert(x.routine[up]).second) continue;
      at = callers.child(at, x.routine[up]);
      add(callers.at(at), calls, 0, x.incl_ns[outer], excl);
    }
  }
  Sandwich s{callers.build(x.routines), callees.build(x.routines)};
  const Totals& t = total->second;
  s.callers.calls = t.calls;
  s.callers.subrs = t.subrs;
  s.callers.incl_ns = t.incl_ns;
  s.callers.excl_ns = t.excl_ns;
  return s;
}

Sandwich compute_sandwich(const ProfileFile& file, std::int64_t routine_id) {
  return CallerIndex(file).sandwich(routine_id);
}

}  // namespace sonde::analyzers
