// The rows of the `callpaths` view (a path of routine ids below the thread roots, merged over
// the counted threads, counted_nodes, and processes), walked from the nodes in memory in the
// view's order (path, then path_ids), for the exports that write one line a row. Reading the
// view itself built every path's string in SQL and sorted them: 81 s and 4.7 GB on the
// benchmark's 1M-node, 432-deep tree, whose paths are 3.4 GB of text.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// The routines by index, with each name's place among all the sort keys the walk compares:
// "name" (the path ends there) and "name;" (a longer path goes on through it).
struct WalkRoutines {
  std::vector<std::int64_t> id;
  std::vector<std::string> id_text;      // as path_ids spells it
  std::vector<std::string> name, frame;  // frame: folded_frame(name)
  std::vector<std::uint32_t> ends_rank, goes_on_rank;
  std::unordered_map<std::int64_t, std::uint32_t> index;
  bool semicolon = false;  // a name holds ';': the view's order is not the walk's
};
WalkRoutines read_walk_routines(const ProfileFile& file);

// One row of the view as the walk meets it: `path` a path for CallpathWalk::ids(), its sums
// over the nodes of that path and, as asked, its frames joined by ';' as folded_frame() writes
// them and its names joined as they are (the view's path).
struct CallpathRow {
  std::uint32_t path;
  std::int64_t calls, incl_ns, excl_ns;
  std::string_view frames, names;
};

class CallpathWalk {
 public:
  // Reads the nodes; `frames`, `names`: spell out each row's CallpathRow::frames, ::names (the
  // copies are most of a deep tree's time).
  CallpathWalk(const ProfileFile& file, const WalkRoutines& routines, bool frames, bool names);
  // Calls `row` for every row of the view, in its order but where a name holds ';' (then
  // routines.semicolon: sort the rows by names, then path_ids).
  void run(const std::function<void(const CallpathRow&)>& row);
  // A path's routine ids joined by '/' (the view's path_ids).
  std::string ids(std::uint32_t path) const;
  // A path's parent path (kNone at the top) and last routine (an index of WalkRoutines).
  std::uint32_t parent(std::uint32_t path) const { return path_parent_[path]; }
  std::uint32_t routine(std::uint32_t path) const { return path_routine_[path]; }

  static constexpr std::uint32_t kNone = UINT32_MAX;

 private:
  // Every node, by node_id, its children as one array (first_child[i] .. first_child[i + 1]).
  struct Nodes {
    std::vector<std::int64_t> calls, incl_ns, excl_ns;
    std::vector<std::uint32_t> routine;  // kNone: a routine the file does not list
    std::vector<std::uint32_t> first_child, children;
    std::vector<std::uint32_t> top;  // the children of thread roots (depth 0)
  };
  // The nodes of one path of names (a name-trie node): several where routines share a name or
  // threads share a path. `parent_path` is its own path's parent, an entry of paths.
  struct Member {
    std::uint32_t rank, routine, node, parent_path;
  };
  struct Group {
    std::vector<Member> members;  // sorted by parent path, then routine
  };
  struct Item {
    std::uint32_t rank, group;
    bool goes_on;
    std::size_t frames, names;  // the parent's joined frames and names: that many bytes
  };
  std::uint32_t new_group(std::vector<Member>&& members);
  void push_children(std::vector<Member>& found, std::size_t frames, std::size_t names);
  void rows_of(const Item& item, const std::function<void(const CallpathRow&)>& row);

  const WalkRoutines& routines_;
  bool frames_wanted_, names_wanted_;
  Nodes nodes_;
  // Paths of routine ids, the rows of callpaths: each its parent path (kNone at the top) and
  // last routine.
  std::vector<std::uint32_t> path_parent_, path_routine_;
  std::vector<Group> groups_;
  std::vector<std::uint32_t> free_;
  std::vector<Item> todo_;
  std::string frames_, names_, frames_row_, names_row_;
  mutable std::vector<std::uint32_t> chain_;  // ids()'s, kept between calls
};

}  // namespace sonde::analyzers
