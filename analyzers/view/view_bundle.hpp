// The data of `sonde view`: one JSON document with what the analyzers compute for each profile
// (the same functions as the subcommands' --format json), which the browser viewer only shows.
// The server hands it out part by part, each computed when first asked for, so the first panel
// does not wait for the metrics of the last; --html and view-bundle write it whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sonde::analyzers {

// Bumped when a member the viewer reads changes meaning or goes away.
inline constexpr int kViewBundleFormat = 2;

// Frames under this % of their tree's total are folded into one "(N more)" entry per parent
// (`sonde tree --min-pct 0` lists them): 1e-4 of the total is a pixel at 8x zoom. The benchmark's
// random 1M-path tree keeps 76k frames (19 MB of JSON) at 0.01 %, 252k (63 MB) at 0.001 %.
inline constexpr double kViewTreeMinPct = 0.01;

// The server's first tree ("tree_first"): frames of at least 0.1 % of the total, 1.3 px of a
// 1280 px page, down to the 64th level: the first view draws 31 rows (the panel is 560 px
// tall) and 0.5 px and up. The benchmark's 1M-path tree (384 levels) keeps 22k such frames at
// every level (5.5 MB of JSON, 0.4 s of the browser's time), 3.6k in the first 64; the finer
// tree (76k frames at 0.01 %, every level) comes next ("tree").
inline constexpr double kViewFirstTreeMinPct = 0.1;
inline constexpr int kViewFirstTreeDepth = 64;

// The callers panel ("sandwich_<routine_id>": `sonde tree --callers` and `--callees` of one
// routine): chains below 0.5 % of the routine's time folded, as `sonde tree` folds by default.
// The whole bundle (--html) carries the first kViewSandwichMax routines of `sonde report`'s
// order (exclusive time), as many as fit in kViewSandwichBytes; the server makes any routine's
// when asked. The 1M-path benchmark file's 50 were 58 MB (2.2 MB the largest) beside its 24 MB
// bundle; torch_cnn's 50 are 165 KB.
inline constexpr double kViewSandwichMinPct = 0.5;
inline constexpr std::size_t kViewSandwichMax = 50;
inline constexpr std::size_t kViewSandwichBytes = 4 << 20;

// The flame graph coloured by each path's change of share against another profile
// ("tree_diff_<j>": profile j as the baseline; view/view_trees.hpp): the server makes any pair
// when the page asks; the whole bundle carries every pair of up to kViewComparedMax profiles of
// at most kViewComparedNodesMax nodes rows each. Each pair loads both merged trees: the 1M-node,
// 432-level benchmark file against itself takes 3 s and 800 MB.
inline constexpr std::size_t kViewComparedMax = 4;
inline constexpr std::int64_t kViewComparedNodesMax = 200'000;

// A profile's members in the whole bundle, in the order the page needs them: the run facts and
// the tree draw the first panel. "samples", "ranks" and "rank_routines" are null where the
// profile has none.
// The server also serves "tree_first", which the whole bundle has no need of, and "timeline"
// (view_timeline.hpp), which the whole bundle carries as far as its own cap ("timeline_html").
// "tree_scopes" lists the ranks and processes with a merged tree of their own, each in the part
// it names (tree_rank_<R>, tree_process_<process_id>), which follow these in the whole bundle.
inline constexpr std::string_view kViewParts[] = {
    "run",      "tree",       "tree_merged", "tree_scopes", "report", "shapes",       "metrics",
    "roofline", "candidates", "lines",       "samples",     "ranks",  "rank_routines"};

// The bundle's parts for one or two profiles (two: the diff of the first against the second).
// Every part is computed once, when first asked for, one at a time (the server's threads share
// it), and serialised once. Strings that are not UTF-8 come out with U+FFFD.
class ViewData {
 public:
  // Opens each file now, so that a missing or foreign one is an Error before anything is served.
  explicit ViewData(std::vector<std::string> profiles);
  ~ViewData();
  ViewData(const ViewData&) = delete;
  ViewData& operator=(const ViewData&) = delete;

  // {"format_version": 1, "profiles": [{"path": ...}, ...], "diff": true|false,
  //  "parts": [kViewParts...]}: what the page asks for next.
  std::string index() const;
  // One part of profile `profile` as JSON text; null for an unknown part or profile.
  std::shared_ptr<const std::string> part(std::size_t profile, std::string_view name);
  // Makes the parts of the first profile's first panel (run, first tree, merged tree where
  // there is one) ahead of the page's requests. Errors are left for the request to report.
  void prepare_first_panel();
  // The diff's JSON, "null" for one profile.
  std::string diff();
  // {"format_version": 1, "profiles": [{"path", every part}...], "diff": ...}
  std::string whole();
  // The same text handed to `write` piece by piece, every part made by the time it is handed
  // on (an error comes before the first piece only when the parts were made before: --html
  // calls this twice, the first time to make them and write nothing).
  void whole(const std::function<void(std::string_view)>& write);

 private:
  // Whether the whole bundle carries profile a's tree coloured against b's (kViewComparedMax).
  bool comparable(std::size_t a, std::size_t b);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The whole bundle as a document (ViewData::whole, parsed). Throws Error for an unreadable file.
nlohmann::json make_view_bundle(const std::vector<std::string>& profiles);

}  // namespace sonde::analyzers
