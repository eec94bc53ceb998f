// The `sonde` command: parses the command line and hands each subcommand to the analyzers
// library. Nothing is computed here.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <optional>

#include "tools/calibrate.hpp"
#include "profile/call_tree.hpp"
#include "advice/candidates.hpp"
#include "metrics/diff.hpp"
#include "export/export.hpp"
#include "tools/launcher.hpp"
#include "render/line_report.hpp"
#include "render/metrics_report.hpp"
#include "profile/profile_file.hpp"
#include "profile/query.hpp"
#include "render/report.hpp"
#include "profile/run_summary.hpp"
#include "render/shapes.hpp"
#include "render/table_format.hpp"
#include "render/tree.hpp"

namespace {

using namespace sonde::analyzers;

constexpr int kUsageError = 2;

struct Args {
  std::string file;
  std::string file_after;  // sonde diff
  std::string format = "text";
  std::string sort = "excl";
  std::string by = "routine";
  std::optional<std::string> lines;
  std::size_t top = 0;
  double min_pct = 0.5;
  std::optional<int> depth;
  std::string threads = "each";
  std::string sql;
  std::optional<std::string> output;
  std::string section = "all";
  std::vector<std::string> phase_map;  // sonde metrics --phase
  RunOptions run;
  CalibrateCommand calibrate;
};

void print_table(const Table& table, Format format) {
  switch (format) {
    case Format::kText: std::cout << render_text(table); break;
    case Format::kCsv: std::cout << render_csv(table); break;
    case Format::kJson: std::cout << render_json(table).dump(2) << '\n'; break;
  }
}

int cmd_report_lines(const Args& a) {
  Format format = parse_format(a.format);
  ProfileFile file = ProfileFile::open(a.file);
  LineCosts costs = compute_line_costs(file, a.lines.value_or(""));
  switch (format) {
    case Format::kText: std::cout << render_line_report_text(costs); break;
    case Format::kCsv: std::cout << render_csv(line_costs_table(costs)); break;
    case Format::kJson: std::cout << render_line_report_json(a.file, costs).dump(2) << '\n'; break;
  }
  return 0;
}

int cmd_report(const Args& a) {
  if (a.by == "line" || a.lines) return cmd_report_lines(a);
  ProfileFile file = ProfileFile::open(a.file);
  RunSummary run = load_run_summary(file);
  Hotspots hotspots = compute_hotspots(file, parse_report_sort(a.sort));
  switch (parse_format(a.format)) {
    case Format::kText: std::cout << render_report_text(run, hotspots, a.top); break;
    case Format::kCsv:
      // The table stays machine-readable; the run's warnings still reach the user.
      std::cerr << render_notes(run);
      std::cout << render_csv(hotspots_table(hotspots, a.top));
      break;
    case Format::kJson:
      std::cout << render_report_json(a.file, run, hotspots, a.top).dump(2) << '\n';
      break;
  }
  return 0;
}

int cmd_tree(const Args& a) {
  Format format = parse_format(a.format);
  if (format == Format::kCsv) throw Error("tree has no csv format (text or json)", kUsageError);
  ProfileFile file = ProfileFile::open(a.file);
  TreeOptions options{a.min_pct, a.depth, a.threads == "merge"};
  std::vector<ThreadTree> trees = load_thread_trees(file);
  if (format == Format::kJson) std::cout << render_tree_json(trees, options).dump(2) << '\n';
  else std::cout << render_tree_text(trees, options);
  return 0;
}

int cmd_shapes(const Args& a) {
  Format format = parse_format(a.format);
  ProfileFile file = ProfileFile::open(a.file);
  std::vector<ShapeRow> rows = compute_shapes(file, a.top);
  if (rows.empty() && format == Format::kText) {
    std::cout << "no GEMM-like calls recorded\n";
    return 0;
  }
  print_table(shapes_table(rows), format);
  return 0;
}

int cmd_query(const Args& a) {
  Format format = parse_format(a.format);
  ProfileFile file = ProfileFile::open(a.file);
  print_table(run_query(file, a.sql), format);
  return 0;
}

int cmd_export(const Args& a) {
  ProfileFile file = ProfileFile::open(a.file);
  std::ofstream out_file;
  if (a.output) {
    out_file.open(*a.output, std::ios::binary | std::ios::trunc);
    if (!out_file) throw Error(fmt::format("cannot write {}: {}", *a.output, std::strerror(errno)));
  }
  std::ostream& out = a.output ? out_file : std::cout;
  if (a.format == "folded") write_folded(load_thread_trees(file), out);
  else if (a.format == "csv") out << render_csv(run_query(file, "SELECT * FROM callpaths ORDER BY path"));
  else write_chrome_trace(file, out);
  out.flush();
  if (!out) throw Error(fmt::format("writing {} failed", a.output.value_or("standard output")));
  return 0;
}

int cmd_candidates(const Args& a) {
  Format format = parse_format(a.format);
  ProfileFile file = ProfileFile::open(a.file);
  std::vector<Candidate> candidates = compute_candidates(file);
  if (format == Format::kJson) std::cout << render_candidates_json(candidates, a.top).dump(2) << '\n';
  else std::cout << render_candidates_text(candidates, a.top);
  return 0;
}

int cmd_metrics(const Args& a) {
  Format format = parse_format(a.format);
  std::vector<std::string> sections = parse_metrics_sections(a.section);
  if (format == Format::kCsv && sections.size() != 1)
    throw Error("csv holds one table: name it with --section", kUsageError);
  std::vector<PhaseMapping> mappings;
  for (const std::string& m : a.phase_map) mappings.push_back(parse_phase_mapping(m));
  ProfileFile file = ProfileFile::open(a.file);
  MetricsReport report = compute_metrics_report(file, mappings);
  switch (format) {
    case Format::kText: std::cout << render_metrics_text(report, sections, a.top); break;
    case Format::kCsv: std::cout << render_csv(metrics_section_table(report, sections[0], a.top)); break;
    case Format::kJson: std::cout << render_metrics_json(report, sections, a.top).dump(2) << '\n'; break;
  }
  return 0;
}

int cmd_diff(const Args& a) {
  Format format = parse_format(a.format);
  Metrics before = compute_metrics(ProfileFile::open(a.file));
  Metrics after = compute_metrics(ProfileFile::open(a.file_after));
  ProfileDiff diff = compute_diff(before, after);
  if (format == Format::kJson) std::cout << render_diff_json(a.file, a.file_after, diff).dump(2) << '\n';
  else std::cout << render_diff_text(diff);
  return 0;
}

// The command of `sonde run` starts at "--" or at the first word that is neither an option nor
// an option's value, so `sonde run ./train --steps 3` works without "--" and the command's own
// options never reach CLI11. Removes the command from args and returns it.
std::vector<std::string> split_run_command(std::vector<std::string>& args) {
  if (args.empty() || args[0] != "run") return {};
  std::size_t i = 1;
  std::vector<std::string> command;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.empty() || arg[0] != '-') {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (arg == "-o" || arg == "--output" || arg == "--flush-interval" || arg == "--counters") ++i;
  }
  args.resize(std::min(i, args.size()));
  return command;
}

void add_file(CLI::App* cmd, Args& a) {
  cmd->add_option("file", a.file, "Profile database written by sonde run / libsonde.so")
      ->required();
}

CLI::Option* add_format(CLI::App* cmd, Args& a, std::vector<std::string> choices) {
  return cmd->add_option("-f,--format", a.format, "Output format")
      ->check(CLI::IsMember(choices))
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"sonde: where the time of a deep-learning workload goes", "sonde"};
  app.set_version_flag("--version", "sonde 0.1.0 (reads profile schema up to version 1)");
  app.require_subcommand(0, 1);
  app.footer("Exit codes: 0 success, 1 error (unreadable profile, bad SQL), 2 usage error.\n"
             "sonde run exits with the command's status (128+N if killed by signal N, 127 if "
             "not found).");

  auto* report = app.add_subcommand("report", "Flat profile, one row per routine (like TAU pprof)");
  add_file(report, a);
  report->add_option("-n,--top", a.top, "Rows to show, largest first (0: all)")->capture_default_str();
  add_format(report, a, {"text", "csv", "json"});
  report->add_option("-s,--sort", a.sort, "Sort key: exclusive time, inclusive time or calls")
      ->check(CLI::IsMember({"excl", "incl", "calls"}))
      ->capture_default_str();
  auto* by = report->add_option("--by", a.by, "One row per routine, or per source line of the "
                                              "functions recorded by python3 -m sonde --lines")
      ->check(CLI::IsMember({"routine", "line"}))
      ->capture_default_str();
  report->add_option("--lines", a.lines, "With --by line: only functions matching this glob "
                                         "(e.g. 'update_core*'); implies --by line");

  auto* tree = app.add_subcommand("tree", "Calling-context tree (Python frames and native calls)");
  add_file(tree, a);
  tree->add_option("--min-pct", a.min_pct, "Fold nodes below this % of the tree's total")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  tree->add_option("--depth", a.depth, "Deepest level shown (the thread root is level 0)")
      ->check(CLI::NonNegativeNumber);
  tree->add_option("--threads", a.threads, "One tree per thread (each) or one for all (merge)")
      ->check(CLI::IsMember({"each", "merge"}))
      ->capture_default_str();
  add_format(tree, a, {"text", "json"});

  auto* shapes = app.add_subcommand("shapes", "GEMM-like calls per shape and call site, GFLOP/s");
  add_file(shapes, a);
  shapes->add_option("-n,--top", a.top, "Rows to show, by time (0: all)")->capture_default_str();
  add_format(shapes, a, {"text", "csv", "json"});

  auto* query = app.add_subcommand("query", "Read-only SQL over the profile's tables and views");
  add_file(query, a);
  query->add_option("sql", a.sql, "SQL, e.g. \"SELECT * FROM hotspots ORDER BY excl_s DESC\"")
      ->required();
  add_format(query, a, {"text", "csv", "json"});

  auto* exp = app.add_subcommand("export", "The profile for other tools: chrome, folded or csv");
  add_file(exp, a);
  exp->add_option("-f,--format", a.format,
                  "chrome: trace-event JSON (Perfetto); folded: flame-graph stacks; csv: callpaths")
      ->check(CLI::IsMember({"chrome", "folded", "csv"}))
      ->required();
  exp->add_option("-o,--output", a.output, "Output file (default: standard output)");

  auto* candidates = app.add_subcommand(
      "candidates", "Tuning candidates from the advice rules, ranked by estimated gain");
  add_file(candidates, a);
  candidates->add_option("-n,--top", a.top, "Candidates to show, best first (0: all)")
      ->capture_default_str();
  add_format(candidates, a, {"text", "json"});

  auto* metrics = app.add_subcommand(
      "metrics", "Derived metrics: roofline per routine, time per phase, iteration breakdown "
                 "(t_io t_h2d t_f t_b t_u t_comm), counter metrics (IPC, miss rates), GPU "
                 "kernels (TAU's warps/instruction and global loads/instruction x time)");
  add_file(metrics, a);
  metrics->add_option("--section", a.section,
                      "all, roofline, phases, breakdown, counters or kernels")
      ->capture_default_str();
  metrics->add_option("-n,--top", a.top, "Rows per table, largest first (0: all)")
      ->capture_default_str();
  metrics->add_option("--phase", a.phase_map,
                      "CLASS=GLOB: routines matching GLOB count as that breakdown class "
                      "(t_io, t_h2d, t_f, t_b, t_u, t_comm); repeatable");
  add_format(metrics, a, {"text", "csv", "json"});

  auto* diff = app.add_subcommand("diff", "Two profiles side by side: time per phase and routine "
                                          "with the speedup, GEMM GFLOP/s per shape");
  diff->add_option("before", a.file, "Profile before the change")->required();
  diff->add_option("after", a.file_after, "Profile after the change")->required();
  add_format(diff, a, {"text", "json"});

  auto* run = app.add_subcommand("run", "Run a command with libsonde.so preloaded");
  run->add_option("-o,--output", a.run.output, "Profile database to write")->capture_default_str();
  run->add_flag("--force", a.run.force, "Replace the output (and its -journal/-wal/-shm) if it exists");
  run->add_flag("--trace", a.run.trace, "Also record every call as a timed event (SONDE_TRACE=1)");
  run->add_option("--flush-interval", a.run.flush_interval,
                  "Seconds between periodic flushes (SONDE_FLUSH_INTERVAL)")
      ->check(CLI::NonNegativeNumber);
  run->add_option("--counters", a.run.counters, "Comma-separated PAPI events (SONDE_COUNTERS)");
  run->description("Run a command with libsonde.so preloaded: sonde run [OPTIONS] [--] COMMAND [ARGS...]");
  run->footer(environment_help());

  auto* cal = app.add_subcommand(
      "calibrate", "Measure peak GEMM GFLOP/s and memory bandwidth into the peaks file");
  auto* quick = cal->add_flag("--quick", a.calibrate.quick,
                              "Smaller GEMMs (256, 512) and fewer passes: seconds, not a minute");
  cal->add_option("-o,--output", a.calibrate.output,
                  "Peaks file (default: $SONDE_PEAKS, else $XDG_CACHE_HOME/sonde/peaks.txt, "
                  "else ~/.cache/sonde/peaks.txt)");
  auto* blas = cal->add_option("--blas", a.calibrate.blas,
                               "BLAS library whose GEMMs are timed (default libblas.so.3, the "
                               "system's); for a program's % of peak, the one it uses: its "
                               "profile's blas.library")
                   ->type_name("PATH");
  auto* set = cal->add_option("--set", a.calibrate.sets,
                              "Record a hand-given peak (source manual), measure nothing; "
                              "THREADS 1 or 0 = all (default)")
                  ->type_name("RESOURCE[@THREADS]=VALUE");
  auto* show = cal->add_flag("--show", a.calibrate.show,
                             "Print the peaks file (after any --set), measure nothing");
  quick->excludes(set)->excludes(show);
  blas->excludes(set)->excludes(show);
  cal->footer("RESOURCE: gemm.f32, gemm.f64 (GFLOP/s), mem.bw (GB/s). Calibrated lines are "
              "replaced, manual ones kept unless --set again.");

  auto usage_error = [&](const CLI::Error& e) {
    int rc = app.exit(e);  // prints CLI11's message, or the help for --help
    return rc == 0 ? 0 : kUsageError;
  };
  std::vector<std::string> args(argv + 1, argv + argc);
  a.run.command = split_run_command(args);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last-argument-first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return usage_error(e);
  } catch (const CLI::CallForVersion& e) {
    return usage_error(e);
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty()) std::cerr << app.help();
    return usage_error(e);
  }
  if (app.get_subcommands().empty()) {
    std::cerr << app.help();
    return kUsageError;
  }

  CLI::App* cmd = app.get_subcommands().front();
  if (cmd == run) {
    if (a.run.command.empty()) {
      std::cerr << "sonde run: no command given\n" << run->help();
      return kUsageError;
    }
  }
  if (cmd == report && a.lines && by->count() > 0 && a.by != "line") {
    std::cerr << "sonde report: --lines needs --by line\n";
    return kUsageError;
  }
  std::string name = cmd->get_name();
  try {
    if (cmd == report) return cmd_report(a);
    if (cmd == tree) return cmd_tree(a);
    if (cmd == shapes) return cmd_shapes(a);
    if (cmd == query) return cmd_query(a);
    if (cmd == exp) return cmd_export(a);
    if (cmd == candidates) return cmd_candidates(a);
    if (cmd == diff) return cmd_diff(a);
    if (cmd == metrics) return cmd_metrics(a);
    if (cmd == run) return run_command(a.run);
    if (cmd == cal) return calibrate_command(a.calibrate);
  } catch (const Error& e) {
    std::cout.flush();
    fmt::print(stderr, "sonde {}: {}\n", name, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    fmt::print(stderr, "sonde {}: internal error: {}\n", name, e.what());
    return 1;
  } catch (...) {
    fmt::print(stderr, "sonde {}: internal error\n", name);
    return 1;
  }
  return kUsageError;
}
