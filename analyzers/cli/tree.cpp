// sonde tree: the calling-context tree, Python frames and native calls mixed.
#include "render/tree.hpp"

#include <iostream>
#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "cli/routine_arg.hpp"
#include "profile/call_tree.hpp"
#include "profile/callers.hpp"
#include "profile/hotspots.hpp"
#include "profile/rank_file.hpp"
#include "render/callers.hpp"
#include "render/colour.hpp"
#include "render/samples.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  double min_pct = 0.5;
  std::optional<int> depth;
  std::string threads = "each";
  std::optional<std::int64_t> rank;
  std::optional<std::int64_t> pid;
  std::string callers, callees;  // a routine whose callers (or callees) are shown instead
};

// One routine's callers or callees, over the busy threads (as `sonde report`'s rows).
int sandwich(const ProfileFile& file, const Options& a, Format format) {
  bool up = !a.callers.empty();
  Hotspots h = compute_hotspots(file);
  const HotspotRow& row = pick_routine(h, up ? a.callers : a.callees);
  Sandwich s = compute_sandwich(file, row.routine_id, {a.min_pct, a.depth, up, !up});
  SandwichSide side = up ? SandwichSide::kCallers : SandwichSide::kCallees;
  TreeOptions options{a.min_pct, a.depth, true};
  if (format == Format::kJson)
    print_json("tree", a.file, render_sandwich_json(s, row, options, &side));
  else if (format == Format::kCsv)
    std::cout << render_csv(sandwich_table(s, side, options));
  else {
    std::string text = render_sandwich_text(s, row, side, options);
    std::cout << (colour_wanted(stdout) ? colour_tree(text) : text);
  }
  return 0;
}

int tree(const Options& a) {
  Format format = parse_format(a.format);
  // One process is in one rank: no note that ranks are summed.
  ProfileFile file = a.pid ? open_pid(open_profile(a.file, a.rank), *a.pid)
                           : open_for_report(a.file, a.rank, format);
  file.check_tree_links();  // its walks follow the links to the root
  if (!a.callers.empty() || !a.callees.empty()) return sandwich(file, a, format);
  TreeOptions options{a.min_pct, a.depth, a.threads == "merge"};
  Forest forest = load_forest(file, options.merge_threads);
  if (format == Format::kJson) {
    // The sampled section the text prints after the tree (report's JSON had it, tree's not).
    Json j = render_tree_json(forest, options);
    j["sampled"] = render_samples_json(file);
    print_json("tree", a.file, std::move(j));
  } else if (format == Format::kCsv)
    write_tree_csv(forest, options, std::cout);
  else {
    std::string text = render_tree_text(forest, options) + render_samples_text(file);
    std::cout << (colour_wanted(stdout) ? colour_tree(text) : text);
  }
  return 0;
}
}  // namespace

Command add_tree(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("tree", "Calling-context tree (Python frames and native calls)");
  add_file(cmd, a->file);
  cmd->add_option("--min-pct", a->min_pct, "Fold nodes below this % of the tree's total")
      ->check(percent_check())
      ->capture_default_str();
  cmd->add_option("--depth", a->depth, "Deepest level shown (the thread root is level 0)")
      ->check(whole_check("a depth (a whole number >= 0)"));
  cmd->add_option("--threads", a->threads, "One tree per thread (each) or one for all (merge)")
      ->check(CLI::IsMember({"each", "merge"}))
      ->capture_default_str();
  add_rank(cmd, a->rank);
  cmd->add_option("--pid", a->pid,
                  "Only this process (its threads), as --rank takes a rank's; with --rank R, "
                  "the process of that pid in rank R")
      ->check(whole_check("a pid (a whole number >= 0)"));
  auto* callers = cmd->add_option("--callers", a->callers,
                                  "This routine's callers, read upward (an inverted tree): "
                                  "what of its calls and time came through each caller chain");
  auto* callees = cmd->add_option("--callees", a->callees,
                                  "This routine's callees: the calls below it, merged");
  callers->excludes(callees);
  auto* threads = cmd->get_option("--threads");
  add_format(cmd, a->format, {"text", "csv", "json"});
  add_colour(cmd);
  auto check = [callers, callees, threads]() -> std::string {
    if ((callers->count() || callees->count()) && threads->count())
      return "--threads does not apply to --callers or --callees: they are over the busy "
             "threads (as sonde report)";
    return "";
  };
  return {cmd, [a] { return tree(*a); }, check};
}

}  // namespace sonde::cli
