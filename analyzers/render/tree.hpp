// `sonde tree`: the calling-context tree as indented text or nested JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "profile/call_tree.hpp"
#include "render/table_format.hpp"

namespace sonde::analyzers {

struct TreeOptions {
  double min_pct = 0.5;           // nodes below this % of the tree's total are folded
  std::optional<int> max_depth;   // deepest level shown (the thread root is level 0)
  bool merge_threads = false;     // one tree for all threads instead of one per thread
};

// Percentages are of each thread's own time, or merged, of the busy threads' time; idle threads
// are listed after the trees.
std::string render_tree_text(const Forest& forest, const TreeOptions& options);
Json render_tree_json(const Forest& forest, const TreeOptions& options);
// One row per node shown (as in the text, folded children summed in a row of kind "folded"),
// with its thread and its path (names joined by ';', root first, as the callpaths view), for
// pandas and spreadsheets: `sonde tree --format csv`.
Table tree_table(const Forest& forest, const TreeOptions& options);

}  // namespace sonde::analyzers
