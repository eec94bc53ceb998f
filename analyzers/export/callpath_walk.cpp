#include "export/callpath_walk.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "export/export_samples.hpp"
#include "profile/counted_nodes.hpp"
#include "profile/node_links.hpp"

namespace sonde::analyzers {

WalkRoutines read_walk_routines(const ProfileFile& file) {
  WalkRoutines r;
  auto st = file.prepare("SELECT routine_id, name FROM routines");
  while (st.step()) {
    r.index.emplace(st.int64(0), static_cast<std::uint32_t>(r.id.size()));
    r.id.push_back(st.int64(0));
    r.id_text.push_back(std::to_string(st.int64(0)));
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

CallpathWalk::CallpathWalk(const ProfileFile& file, const WalkRoutines& routines, bool frames,
                           bool names)
    : routines_(routines), frames_wanted_(frames), names_wanted_(names) {
  Nodes& n = nodes_;
  std::vector<std::int64_t> id, parent_id;
  std::vector<bool> root, has_parent;
  auto st = file.prepare(
      "SELECT node_id, parent_id, routine_id, calls, incl_ns, excl_ns, depth = 0 "
      "FROM " +
      counted_nodes_table(file) + " ORDER BY node_id");
  while (st.step()) {
    id.push_back(st.int64(0));
    has_parent.push_back(!st.is_null(1));
    parent_id.push_back(st.is_null(1) ? 0 : st.int64(1));
    auto r = routines.index.find(st.int64(2));
    n.routine.push_back(r == routines.index.end() ? kNone : r->second);
    n.calls.push_back(st.int64(3));
    n.incl_ns.push_back(st.int64(4));
    n.excl_ns.push_back(st.int64(5));
    root.push_back(st.int64(6) != 0);
  }
  NodeLinks links = link_nodes(id, has_parent, parent_id, root);
  n.first_child = std::move(links.first_child);
  n.children = std::move(links.children);
  n.top = std::move(links.top);
}

std::string CallpathWalk::ids(std::uint32_t p) const {
  chain_.clear();
  for (; p != kNone; p = path_parent_[p]) chain_.push_back(path_routine_[p]);
  std::string out;
  for (auto it = chain_.rbegin(); it != chain_.rend(); ++it) {
    if (!out.empty()) out += '/';
    out += routines_.id_text[*it];
  }
  return out;
}

std::uint32_t CallpathWalk::new_group(std::vector<Member>&& members) {
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
void CallpathWalk::push_children(std::vector<Member>& found, std::size_t frames,
                                 std::size_t names) {
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
        path_parent_.push_back(members[m].parent_path);
        path_routine_.push_back(members[m].routine);
      }
      members[m].parent_path = static_cast<std::uint32_t>(path_parent_.size() - 1);
    }
    std::uint32_t r = members.front().routine;
    std::uint32_t g = new_group(std::move(members));
    items.push_back({routines_.ends_rank[r], g, false, frames, names});
    items.push_back({routines_.goes_on_rank[r], g, true, frames, names});
    at = end;
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.rank > b.rank; });
  todo_.insert(todo_.end(), items.begin(), items.end());
}

// The rows of a group's paths, one a path of ids (as grouped: by parent path, then routine),
// each the sum of its nodes; one name, several paths of ids: the view orders them by path_ids.
void CallpathWalk::rows_of(const Item& item, const std::function<void(const CallpathRow&)>& row) {
  const std::vector<Member>& members = groups_[item.group].members;
  std::uint32_t routine = members.front().routine;
  std::vector<CallpathRow> sums;
  for (const Member& m : members) {
    if (sums.empty() || sums.back().path != m.parent_path)
      sums.push_back({m.parent_path, 0, 0, 0, {}, {}});
    sums.back().calls += nodes_.calls[m.node];
    sums.back().incl_ns += nodes_.incl_ns[m.node];
    sums.back().excl_ns += nodes_.excl_ns[m.node];
  }
  if (sums.size() > 1) {
    std::vector<std::pair<std::string, std::size_t>> tied;  // path_ids, index in sums
    for (std::size_t k = 0; k < sums.size(); ++k) tied.emplace_back(ids(sums[k].path), k);
    std::sort(tied.begin(), tied.end());
    std::vector<CallpathRow> sorted;
    for (const auto& t : tied) sorted.push_back(sums[t.second]);
    sums = std::move(sorted);
  }
  if (frames_wanted_) {
    frames_row_.assign(frames_, 0, item.frames);
    if (!frames_row_.empty()) frames_row_ += ';';
    frames_row_ += routines_.frame[routine];
  }
  if (names_wanted_) {
    names_row_.assign(names_, 0, item.names);
    if (!names_row_.empty()) names_row_ += ';';
    names_row_ += routines_.name[routine];
  }
  for (CallpathRow& s : sums) {
    s.frames = frames_row_;
    s.names = names_row_;
    row(s);
  }
}

void CallpathWalk::run(const std::function<void(const CallpathRow&)>& row) {
  std::vector<Member> found;
  for (std::uint32_t i : nodes_.top)
    if (std::uint32_t r = nodes_.routine[i]; r != kNone)
      found.push_back({routines_.ends_rank[r], r, i, kNone});
  push_children(found, 0, 0);
  while (!todo_.empty()) {
    Item item = todo_.back();
    todo_.pop_back();
    if (!item.goes_on) {
      rows_of(item, row);
      continue;
    }
    std::vector<Member>& members = groups_[item.group].members;
    std::uint32_t routine = members.front().routine;
    if (frames_wanted_) {
      frames_.resize(item.frames);
      if (!frames_.empty()) frames_ += ';';
      frames_ += routines_.frame[routine];
    }
    if (names_wanted_) {
      names_.resize(item.names);
      if (!names_.empty()) names_ += ';';
      names_ += routines_.name[routine];
    }
    found.clear();
    for (const Member& m : members)
      for (std::uint32_t c = nodes_.first_child[m.node]; c < nodes_.first_child[m.node + 1]; ++c)
        if (std::uint32_t child = nodes_.children[c], r = nodes_.routine[child]; r != kNone)
          found.push_back({routines_.ends_rank[r], r, child, m.parent_path});
    std::vector<Member>().swap(members);
    free_.push_back(item.group);
    push_children(found, frames_.size(), names_.size());
  }
}

}  // namespace sonde::analyzers
