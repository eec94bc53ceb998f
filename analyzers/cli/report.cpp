// sonde report: the flat profile, one row per routine (or per source line with --by line).
#include "render/report.hpp"

#include <iostream>
#include <memory>
#include <optional>

#include "cli/command.hpp"
#include "profile/rank_file.hpp"
#include "profile/run_summary.hpp"
#include "render/colour.hpp"
#include "render/line_report.hpp"
#include "render/samples.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::string sort = "excl";
  std::string by = "routine";
  std::optional<std::string> lines;
  std::size_t top = 0;
  std::optional<std::int64_t> rank;
};

int report_lines(const Options& a) {
  Format format = parse_format(a.format);
  ProfileFile file = open_profile(a.file, a.rank);
  LineCosts costs = compute_line_costs(file, a.lines.value_or(""));
  switch (format) {
    case Format::kText:
      std::cout << render_line_report_text(costs);
      break;
    case Format::kCsv:
      std::cout << render_csv(line_costs_table(costs));
      break;
    case Format::kJson:
      print_json("report", a.file, render_line_report_json(a.file, costs));
      break;
  }
  return 0;
}

int report(const Options& a) {
  if (a.by == "line" || a.lines) return report_lines(a);
  // One rank reads as its own file would: its header, notes and percentages are the rank's.
  ProfileFile file = open_profile(a.file, a.rank);
  RunSummary run = load_run_summary(file);
  Hotspots hotspots = compute_hotspots(file, parse_report_sort(a.sort));
  switch (parse_format(a.format)) {
    case Format::kText: {
      std::string text = render_report_text(run, hotspots, a.top);
      std::cout << (colour_wanted(stdout) ? colour_report(text) : text) << render_samples_text(file)
                << render_graphs_hint(file);
    } break;
    case Format::kCsv:
      // The table stays machine-readable; the run's warnings still reach the user.
      std::cerr << render_notes(run);
      std::cout << render_csv(hotspots_table(hotspots, a.top));
      break;
    case Format::kJson: {
      Json j = render_report_json(a.file, run, hotspots, a.top);
      j["sampled"] = render_samples_json(file);  // apart from the exact rows
      print_json("report", a.file, std::move(j));
    } break;
  }
  return 0;
}
}  // namespace

Command add_report(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("report", "Flat profile, one row per routine (like TAU pprof)");
  add_file(cmd, a->file);
  cmd->add_option("-n,--top", a->top, "Rows to show, largest first (0: all)")
      ->check(count_check())
      ->capture_default_str();
  add_format(cmd, a->format, {"text", "csv", "json"});
  add_colour(cmd);
  cmd->add_option("-s,--sort", a->sort,
                  "Sort key: exclusive time (excl, or cProfile's tottime/time), inclusive time "
                  "(incl, cumtime/cumulative), calls (calls, ncalls, pcalls), or ascending by "
                  "name (name, stdname, nfl), file and line (file, filename, module) or line")
      ->check(CLI::IsMember(report_sort_names()))
      ->capture_default_str();
  auto* by = cmd->add_option("--by", a->by,
                             "One row per routine, or per source line of the "
                             "functions recorded by python3 -m sonde --lines")
                 ->check(CLI::IsMember({"routine", "line"}))
                 ->capture_default_str();
  add_rank(cmd, a->rank);
  cmd->add_option("--lines", a->lines,
                  "With --by line: only functions matching this glob "
                  "(e.g. 'update_core*'); implies --by line");
  Command c{cmd, [a] { return report(*a); }};
  c.check = [a, by] {
    return a->lines && by->count() > 0 && a->by != "line" ? std::string("--lines needs --by line")
                                                          : std::string();
  };
  return c;
}

}  // namespace sonde::cli
