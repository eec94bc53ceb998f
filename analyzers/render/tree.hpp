// `sonde tree`: the calling-context tree as indented text or nested JSON.
#pragma once

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "profile/call_tree.hpp"

namespace sonde::analyzers {

// The deepest level a JSON tree spells out (tree --format json, the viewer's trees): a frame at
// this level holds its children as one `cut` summary (count, incl_s, calls) instead. The text and
// CSV trees have no such limit.
inline constexpr int kJsonTreeLevels = 400;

struct TreeOptions {
  double min_pct = 0.5;          // nodes below this % of the tree's total are folded
  std::optional<int> max_depth;  // deepest level shown (the thread root is level 0)
  bool merge_threads = false;    // one tree for all threads instead of one per thread
};

// Percentages are of each thread's own time, or merged, of the busy threads' time; idle threads
// are listed after the trees.
std::string render_tree_text(const Forest& forest, const TreeOptions& options);
Json render_tree_json(const Forest& forest, const TreeOptions& options);
// The same as compact JSON text (dump_json's), written without building the document.
std::string render_tree_json_text(const Forest& forest, const TreeOptions& options);
// One row per node shown (as in the text, folded children summed in a row of kind "folded"),
// with its thread and its path (names joined by ';', root first, as the callpaths view), for
// pandas and spreadsheets: `sonde tree --format csv`.
Table tree_table(const Forest& forest, const TreeOptions& options);
// The same as CSV, each row written as it comes: a deep tree's paths outgrow memory held whole.
void write_tree_csv(const Forest& forest, const TreeOptions& options, std::ostream& out);

// One tree of CPU figures (no device-time columns), percentages of `total`: its column line and
// lines as in render_tree_text, its node as in the JSON, its rows as in tree_table (pid and
// thread empty). What a routine's callers and callees are shown with (render/callers.hpp).
std::string render_node_text(const CallNode& root, std::int64_t total, const TreeOptions& options);
// `more` adds members of its own to each node's object (a folded group has none): what a
// differential tree's nodes carry beside the tree's figures (view/view_trees.hpp).
using NodeFields = std::function<void(const CallNode&, Json&)>;
Json render_node_json(const CallNode& root, std::int64_t total, const TreeOptions& options,
                      const NodeFields& more = {});
Table node_table(const CallNode& root, std::int64_t total, const TreeOptions& options);

}  // namespace sonde::analyzers
