// `sonde export --format folded`: one line per row of the `callpaths` view, in its order (path,
// then path_ids), from the nodes walked once in memory. Reading the view itself built every
// path's string in SQL and sorted them: 81 s and 4.7 GB on the benchmark's 1M-node, 384-deep
// tree, whose lines are 3.4 GB of text.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <string>
#include <tuple>
#include <unordered_map>

#include "export/export.hpp"
#include "export/export_samples.hpp"
#include "render/table_format.hpp"

namespace sonde::analyzers {

// A frame's name as one folded-stack frame: ';' would split it, control characters and bytes
// that are not UTF-8 would break the line (shown as escapes, see visible()), and an empty name
// would leave an empty frame.
std::string folded_frame(const std::string& name) {
  // Escapes that no name can spell: a backslash of the name's own is one too (a region
  // "a\x3bb" was the frame "a;b"), and so is the "<" of a name "<empty>".
  if (name.empty()) return "<empty>";
  if (name == "<empty>") return "\\x3cempty>";
  std::string own;
  for (char c : name) {
    if (c == '\\')
      own += "\\x5c";
    else
      own += c;
  }
  std::string out;
  for (char c : visible(own)) {
    if (c == ';')
      out += "\\x3b";
    else
      out += c;
  }
  return out;
}

namespace {

constexpr std::uint32_t kNone = UINT32_MAX;

// The routines by index, with each name's place among all the sort keys the walk compares:
// "name" (the path ends there) and "name;" (a longer path goes on through it).
struct Routines {
  std::vector<std::int64_t> id;
  std::vector<std::string> name, frame;
  std::vector<std::uint32_t> ends_rank, goes_on_rank;
  std::unordered_map<std::int64_t, std::uint32_t> index;
  bool semicolon = false;  // a name holds ';': the view's order is not the walk's (sort_lines)
};

Routines read_routines(const ProfileFile& file) {
  Routines r;
  auto st = file.prepare("SELECT routine_id, name FROM routines");
  while (st.step()) {
    r.index.emplace(st.int64(0), static_cast<std::uint32_t>(r.id.size()));
    r.id.push_back(st.int64(0));
    r.name.push_back(st.text(1));
    r.frame.push_back(folded_frame(r.name.back()));
    r.semicolon = r.semicolon || r.name.back().find(';') != std::string::npos;
  }
  // Ranks of the keys in byte order (SQLite's BINARY collation); equal names, equal ranks.
  std::vector<std::pair<std::string, std::uint32_t>> keys;  // key, routine * 2 + goes_on
  for (std::uint32_t i = 0; i < r.name.size(); ++i) {
    keys.emplace_back(r.name[i], 2 * i);
    keys.emplace_back(r.name[i] + ";", 2 * i + 1);
  }
  std::sort(keys.begin(), keys.end());
  r.ends_rank.resize(r.name.size());
  r.goes_on_rank.resize(r.name.size());
  std::uint32_t rank = 0;
  for (std::size_t k = 0; k < keys.size(); ++k) {
    if (k > 0 && keys[k].first != keys[k - 1].first) ++rank;
    auto& into = keys[k].second % 2 ? r.goes_on_rank : r.ends_rank;
    into[keys[k].second / 2] = rank;
  }
  return r;
}

// Every node, by node_id, its children as one array (first_child[i] .. first_child[i + 1]).
struct Nodes {
  std::vector<std::int64_t> excl_ns;
  std::vector<std::uint32_t> routine;  // kNone: a routine the file does not list
  std::vector<std::uint32_t> first_child, children;
  std::vector<std::uint32_t> top;  // the children of thread roots (depth 0)
};

Nodes read_nodes(const ProfileFile& file, const Routines& routines) {
  Nodes n;
  std::vector<std::int64_t> id, parent_id;
  std::vector<bool> root, has_parent;
  auto st = file.prepare(
      "SELECT node_id, parent_id, routine_id, excl_ns, depth = 0 FROM nodes ORDER BY node_id");
  while (st.step()) {
    id.push_back(st.int64(0));
    has_parent.push_back(!st.is_null(1));
    parent_id.push_back(st.is_null(1) ? 0 : st.int64(1));
    auto r = routines.index.find(st.int64(2));
    n.routine.push_back(r == routines.index.end() ? kNone : r->second);
    n.excl_ns.push_back(st.int64(3));
    root.push_back(st.int64(4) != 0);
  }
  std::vector<std::uint32_t> parent(id.size(), kNone);
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
    if (parent[i] == kNone) continue;
    n.children[filled[parent[i]]++] = i;
    if (root[parent[i]]) n.top.push_back(i);
  }
  return n;
}

// The nodes of one path of names (a name-trie node): several where routines share a name or
// threads share a path. `path` is each one's path of routine ids, an entry of `Paths`.
struct Member {
  std::uint32_t rank, routine, node, parent_path;
};

// Paths of routine ids, the rows of callpaths: each its parent path (kNone at the top) and
// last routine.
struct Paths {
  std::vector<std::uint32_t> parent, routine;
  std::string ids(std::uint32_t p, const Routines& routines) const {
    std::vector<std::uint32_t> chain;
    for (; p != kNone; p = parent[p]) chain.push_back(routine[p]);
    std::string out;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it)
      out += fmt::format("{}{}", out.empty() ? "" : "/", routines.id[*it]);
    return out;
  }
};

class Walk {
 public:
  // `line(text, path)`: each line, with its path of routine ids (an entry of paths()).
  template <typename Line>
  void run(const Routines& routines, const Nodes& nodes, Line&& line);
  const Paths& paths() const { return paths_; }

 private:
  struct Group {
    std::vector<Member> members;  // sorted by parent path, then routine
  };
  struct Item {
    std::uint32_t rank, group;
    bool goes_on;
    std::size_t prefix;  // the parent's folded path: that many bytes of `prefix_`
  };
  std::uint32_t new_group(std::vector<Member>&& members);
  void push_children(std::vector<Member>& found, const Routines& routines, std::size_t prefix);

  Paths paths_;
  std::vector<Group> groups_;
  std::vector<std::uint32_t> free_;
  std::vector<Item> todo_;
  std::string prefix_;
};

std::uint32_t Walk::new_group(std::vector<Member>&& members) {
  std::uint32_t g;
  if (!free_.empty()) {
    g = free_.back();
    free_.pop_back();
  } else {
    g = static_cast<std::uint32_t>(groups_.size());
    groups_.emplace_back();
  }
  groups_[g].members = std::move(members);
  return g;
}

// `found`: the nodes one step below a group, each with its own path's parent. Groups them by
// name, gives each distinct path of routine ids its entry, and puts each group's two items on
// the stack so that they come off in the view's order.
void Walk::push_children(std::vector<Member>& found, const Routines& routines, std::size_t prefix) {
  std::sort(found.begin(), found.end(), [](const Member& a, const Member& b) {
    return std::tie(a.rank, a.parent_path, a.routine, a.node) <
           std::tie(b.rank, b.parent_path, b.routine, b.node);
  });
  std::vector<Item> items;
  for (std::size_t at = 0; at < found.size();) {
    std::size_t end = at;
    while (end < found.size() && found[end].rank == found[at].rank) ++end;
    std::vector<Member> members(found.begin() + at, found.begin() + end);
    for (std::size_t m = 0; m < members.size(); ++m) {
      bool same = m > 0 && members[m].parent_path == found[at + m - 1].parent_path &&
                  members[m].routine == found[at + m - 1].routine;
      if (!same) {
        paths_.parent.push_back(members[m].parent_path);
        paths_.routine.push_back(members[m].routine);
      }
      members[m].parent_path = static_cast<std::uint32_t>(paths_.parent.size() - 1);
    }
    std::uint32_t r = members.front().routine;
    std::uint32_t g = new_group(std::move(members));
    items.push_back({routines.ends_rank[r], g, false, prefix});
    items.push_back({routines.goes_on_rank[r], g, true, prefix});
    at = end;
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.rank > b.rank; });
  todo_.insert(todo_.end(), items.begin(), items.end());
}

template <typename Line>
void Walk::run(const Routines& routines, const Nodes& nodes, Line&& line) {
  std::vector<Member> found;
  for (std::uint32_t i : nodes.top)
    if (std::uint32_t r = nodes.routine[i]; r != kNone)
      found.push_back({routines.ends_rank[r], r, i, kNone});
  push_children(found, routines, 0);
  std::string text;
  std::vector<std::pair<std::string, std::uint32_t>> tied;  // path_ids, path
  while (!todo_.empty()) {
    Item item = todo_.back();
    todo_.pop_back();
    // The members' paths after each other (as grouped): each one line, of its nodes' sum.
    std::vector<Member>& members = groups_[item.group].members;
    const std::string& frame = routines.frame[members.front().routine];
    prefix_.resize(item.prefix);
    if (!item.goes_on) {
      std::vector<std::pair<std::uint32_t, std::int64_t>> sums;  // path, exclusive ns
      for (const Member& m : members) {
        if (sums.empty() || sums.back().first != m.parent_path) sums.emplace_back(m.parent_path, 0);
        sums.back().second += nodes.excl_ns[m.node];
      }
      if (sums.size() > 1) {  // one name, several paths of ids: the view orders them by path_ids
        tied.clear();
        for (const auto& [path, ns] : sums) tied.emplace_back(paths_.ids(path, routines), path);
        std::sort(tied.begin(), tied.end());
        std::unordered_map<std::uint32_t, std::int64_t> of(sums.begin(), sums.end());
        for (std::size_t k = 0; k < tied.size(); ++k)
          sums[k] = {tied[k].second, of[tied[k].second]};
      }
      for (const auto& [path, ns] : sums) {
        // As the view's excl_s (SUM(excl_ns) / 1e9) in microseconds.
        auto us = static_cast<std::int64_t>(std::llround(static_cast<double>(ns) / 1e9 * 1e6));
        if (us <= 0) continue;
        text.assign(prefix_);
        if (!text.empty()) text += ';';
        text += frame;
        text += ' ';
        fmt::format_to(std::back_inserter(text), "{}", us);
        text += '\n';
        line(text, path);
      }
      continue;
    }
    if (!prefix_.empty()) prefix_ += ';';
    prefix_ += frame;
    found.clear();
    for (const Member& m : members)
      for (std::uint32_t c = nodes.first_child[m.node]; c < nodes.first_child[m.node + 1]; ++c)
        if (std::uint32_t child = nodes.children[c], r = nodes.routine[child]; r != kNone)
          found.push_back({routines.ends_rank[r], r, child, m.parent_path});
    std::vector<Member>().swap(members);
    free_.push_back(item.group);
    push_children(found, routines, prefix_.size());
  }
}

// The busy threads' time in no measured call, as a frame of its own beside the top-level
// calls: left out, a flame graph's 100 % was only the measured part (47.678 s of 51.559 s
// dropped from one run), where the report's is the threads' time.
std::string root_line(const ProfileFile& file) {
  auto root = file.prepare("SELECT routine, excl_s FROM hotspots WHERE kind = 'root'");
  std::int64_t root_us = 0;
  std::string root_name;
  while (root.step()) {
    root_us += static_cast<std::int64_t>(std::llround(root.real(1) * 1e6));
    root_name = folded_frame(root.text(0));
  }
  return root_us > 0 ? fmt::format("{} {}\n", root_name, root_us) : "";
}

}  // namespace

void write_folded(const ProfileFile& file, std::ostream& out) {
  // One line per row of the callpaths view (a path of routines, merged over threads); two
  // routines of one display path stay two lines, which flame-graph tools add up themselves.
  // The walk's order is the view's (path, then path_ids): a name's lines, then the lines that
  // go on through it, placed among its siblings' by the keys "name" and "name;".
  Routines routines = read_routines(file);
  Nodes nodes = read_nodes(file, routines);
  Walk walk;
  if (!routines.semicolon) {
    std::string buffer;
    walk.run(routines, nodes, [&](const std::string& text, std::uint32_t) {
      buffer += text;
      if (buffer.size() >= (1u << 20)) {
        out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        buffer.clear();
      }
    });
    out << buffer << root_line(file);
    return;
  }
  // A ';' inside a name: "a;b" sorts between paths of other frames, so the lines are sorted
  // by the view's own keys (its path joins the names as they are).
  std::vector<std::tuple<std::string, std::string, std::string>> lines;  // path, path_ids, line
  walk.run(routines, nodes, [&](const std::string& text, std::uint32_t path) {
    std::string names;
    for (std::uint32_t p = path; p != kNone; p = walk.paths().parent[p])
      names.insert(0, routines.name[walk.paths().routine[p]] + (p == path ? "" : ";"));
    lines.emplace_back(std::move(names), walk.paths().ids(path, routines), text);
  });
  std::sort(lines.begin(), lines.end());
  for (const auto& l : lines) out << std::get<2>(l);
  out << root_line(file);
}

}  // namespace sonde::analyzers
