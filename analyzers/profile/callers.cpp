#include "profile/callers.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "profile/counted_nodes.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

// A routine's `hotspots` row: the figures the callers tree starts from.
struct Totals {
  std::int64_t calls = 0, subrs = 0, incl_ns = 0, excl_ns = 0;
};

std::int64_t to_ns(double seconds) { return std::llround(seconds * 1e9); }

// A tree built level by level: only the nodes shown are made, the children below the
// threshold summed into their parent's `unloaded`, as load_forest_above leaves them in the file.
// Parents come before their children.
class Trie {
 public:
  explicit Trie(std::int64_t root_routine) { nodes_.push_back({root_routine, -1}); }

  std::size_t add(std::size_t parent, std::int64_t routine_id) {
    nodes_[parent].children.push_back(nodes_.size());
    nodes_.push_back({routine_id, static_cast<std::int64_t>(parent)});
    return nodes_.size() - 1;
  }
  CallNodeFields& at(std::size_t i) { return nodes_[i].data; }
  // The routines from the root down to node i.
  std::unordered_set<std::int64_t> path(std::size_t i) const {
    std::unordered_set<std::int64_t> out;
    for (std::int64_t j = static_cast<std::int64_t>(i); j >= 0; j = nodes_[j].parent)
      out.insert(nodes_[j].data.routine_id);
    return out;
  }

  // Linked from the end, so that a node's children are built before it is: no recursion.
  CallNode build(const std::unordered_map<std::int64_t, CallNodeFields>& routines) {
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
    Node(std::int64_t routine_id, std::int64_t p) : parent(p) { data.routine_id = routine_id; }
    CallNodeFields data;
    std::int64_t parent;
    std::vector<std::size_t> children;
  };
  std::vector<Node> nodes_;
};

void add(CallNodeFields& to, std::int64_t calls, std::int64_t subrs, std::int64_t incl,
         std::int64_t excl) {
  to.calls += calls;
  to.subrs += subrs;
  to.incl_ns += incl;
  to.excl_ns += excl;
}

// Whether a node of `incl` is shown under a tree of `total`: render/tree.cpp's test, in the same
// doubles, so that what is made is what a renderer with the same min_pct shows.
bool shown(std::int64_t incl, std::int64_t total, double min_pct) {
  double pct = total > 0 ? 100.0 * static_cast<double>(incl) / static_cast<double>(total) : 0.0;
  return pct >= min_pct;
}

// One level's children of a trie node: per routine, the members that go on and their sums.
struct Group {
  CallNodeFields sums;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> members;
};

// Makes the groups above the threshold children of `at` (returned with their members, to be
// expanded in turn) and folds the others into its `unloaded`.
std::vector<std::pair<std::size_t, Group>> place(Trie& trie, std::size_t at,
                                                 std::vector<Group>& groups, std::int64_t total,
                                                 double min_pct) {
  std::vector<std::pair<std::size_t, Group>> kept;
  for (Group& g : groups) {
    if (shown(g.sums.incl_ns, total, min_pct)) {
      std::size_t child = trie.add(at, g.sums.routine_id);
      add(trie.at(child), g.sums.calls, g.sums.subrs, g.sums.incl_ns, g.sums.excl_ns);
      kept.emplace_back(child, std::move(g));
    } else {
      auto& u = trie.at(at).rare.edit().unloaded;
      ++u.count;
      u.calls += g.sums.calls;
      u.incl_ns += g.sums.incl_ns;
      u.excl_ns += g.sums.excl_ns;
    }
  }
  return kept;
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
  std::unordered_map<std::int64_t, CallNodeFields> routines;  // load_routine_fields
  std::unordered_map<std::int64_t, Totals> totals;            // the hotspots view, by routine id
};

CallerIndex::CallerIndex(const ProfileFile& file) : impl_(std::make_unique<Impl>()) {
  Impl& x = *impl_;
  std::vector<std::int64_t> ids, parent_ids;
  {
    // In rowid order: ids come sorted, so a parent is found by binary search.
    auto st = file.prepare(
        "SELECT node_id, parent_id, routine_id, recursive, calls, subrs, incl_ns, excl_ns FROM " +
        counted_nodes_table(file) + " ORDER BY node_id");
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
  x.routines = load_routine_fields(file);
  for (auto st = file.prepare("SELECT routine_id, calls, subrs, incl_s, excl_s FROM hotspots");
       st.step();)
    x.totals.emplace(st.int64(0),
                     Totals{st.int64(1), st.int64(2), to_ns(st.real(3)), to_ns(st.real(4))});
}

CallerIndex::~CallerIndex() = default;
CallerIndex::CallerIndex(CallerIndex&&) noexcept = default;
CallerIndex& CallerIndex::operator=(CallerIndex&&) noexcept = default;

Sandwich CallerIndex::sandwich(std::int64_t routine_id, const SandwichOptions& options) const {
  const Impl& x = *impl_;
  auto total = x.totals.find(routine_id);
  auto info = x.routines.find(routine_id);
  auto nodes = x.nodes_of.find(routine_id);
  if (total == x.totals.end() || info == x.routines.end() || nodes == x.nodes_of.end())
    throw Error(fmt::format("routine {} was not called by a busy thread", routine_id), 2);
  if (info->second.kind == kinds::kRoot)
    throw Error(fmt::format("{} is each thread's root: nothing calls it (sonde tree shows what "
                            "it calls)",
                            info->second.name),
                2);
  const Totals& t = total->second;
  const double min_pct = options.min_pct;
  auto expands = [&](int depth) { return !options.max_depth || depth < *options.max_depth; };

  // The outermost nodes (nodes.recursive 0), each with its recursive nodes' calls and
  // exclusive time: a recursive node goes up to the nearest node of the routine, and from there
  // to the outermost one, each node's outermost remembered (linear in the nodes between).
  std::vector<std::uint32_t> outer;
  std::vector<std::int64_t> calls, excl;
  std::unordered_map<std::uint32_t, std::uint32_t> outer_of;  // a node of the routine -> outer
  for (std::uint32_t o : nodes->second) {
    if (x.recursive[o]) continue;
    outer_of.emplace(o, static_cast<std::uint32_t>(outer.size()));
    outer.push_back(o);
    calls.push_back(x.calls[o]);
    excl.push_back(x.excl_ns[o]);
  }
  std::vector<std::uint32_t> chain;
  for (std::uint32_t r : nodes->second) {
    if (!x.recursive[r]) continue;
    std::optional<std::uint32_t> found;
    if (auto it = outer_of.find(r); it != outer_of.end()) found = it->second;
    chain.assign(1, r);
    for (std::int32_t up = x.parent[r]; up >= 0 && !found; up = x.parent[up]) {
      if (x.routine[up] != routine_id) continue;
      if (auto it = outer_of.find(up); it != outer_of.end())
        found = it->second;
      else
        chain.push_back(up);
    }
    if (!found) continue;  // marked recursive without a node of the routine above: left out
    for (std::uint32_t c : chain) outer_of.emplace(c, *found);
    calls[*found] += x.calls[r];
    excl[*found] += x.excl_ns[r];
  }

  // Callers, a level at a time: a member is an outermost node (its index in `outer`) and the
  // caller it has reached. A routine already on the path is passed over: recursion among the
  // callers folded.
  Trie up(routine_id);
  add(up.at(0), t.calls, t.subrs, t.incl_ns, t.excl_ns);
  struct Pending {
    std::size_t at;
    int depth;
    Group group;
  };
  std::vector<Pending> pending;
  {
    Group all;
    for (std::uint32_t i = 0; i < outer.size(); ++i) all.members.emplace_back(i, outer[i]);
    if (options.callers) pending.push_back({0, 0, std::move(all)});
  }
  while (!pending.empty()) {
    Pending p = std::move(pending.back());
    pending.pop_back();
    if (!expands(p.depth)) continue;
    std::unordered_set<std::int64_t> path = up.path(p.at);
    std::unordered_map<std::int64_t, std::size_t> index;
    std::vector<Group> groups;
    for (auto [i, reached] : p.group.members) {
      std::int32_t next = x.parent[reached];
      while (next >= 0 && path.count(x.routine[next])) next = x.parent[next];
      if (next < 0) continue;  // the chain has reached its thread's root
      auto [it, added] = index.try_emplace(x.routine[next], groups.size());
      if (added) {
        groups.emplace_back();
        groups.back().sums.routine_id = x.routine[next];
      }
      Group& g = groups[it->second];
      add(g.sums, calls[i], 0, x.incl_ns[outer[i]], excl[i]);
      g.members.emplace_back(i, static_cast<std::uint32_t>(next));
    }
    p.group.members = {};
    for (auto& [child, g] : place(up, p.at, groups, t.incl_ns, min_pct))
      pending.push_back({child, p.depth + 1, std::move(g)});
  }

  // Callees, a level at a time: a member is a node under the routine's outermost nodes.
  Trie down(routine_id);
  {
    Group all;
    for (std::uint32_t o : outer) {
      all.members.emplace_back(o, o);
      add(down.at(0), x.calls[o], x.subrs[o], x.incl_ns[o], x.excl_ns[o]);
    }
    if (options.callees) pending.push_back({0, 0, std::move(all)});
  }
  while (!pending.empty()) {
    Pending p = std::move(pending.back());
    pending.pop_back();
    if (!expands(p.depth)) continue;
    std::unordered_map<std::int64_t, std::size_t> index;
    std::vector<Group> groups;
    for (auto [node, unused] : p.group.members) {
      for (std::uint32_t k = x.child_start[node]; k < x.child_start[node + 1]; ++k) {
        std::uint32_t c = x.child_list[k];
        auto [it, added] = index.try_emplace(x.routine[c], groups.size());
        if (added) {
          groups.emplace_back();
          groups.back().sums.routine_id = x.routine[c];
        }
        Group& g = groups[it->second];
        add(g.sums, x.calls[c], x.subrs[c], x.incl_ns[c], x.excl_ns[c]);
        g.members.emplace_back(c, c);
      }
    }
    p.group.members = {};
    for (auto& [child, g] : place(down, p.at, groups, t.incl_ns, min_pct))
      pending.push_back({child, p.depth + 1, std::move(g)});
  }
  return Sandwich{up.build(x.routines), down.build(x.routines)};
}

Sandwich compute_sandwich(const ProfileFile& file, std::int64_t routine_id,
                          const SandwichOptions& options) {
  return CallerIndex(file).sandwich(routine_id, options);
}

}  // namespace sonde::analyzers
