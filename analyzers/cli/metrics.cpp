// sonde metrics: roofline per routine, phases, the iteration breakdown, counter metrics and
// GPU kernels.
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "render/colour.hpp"
#include "render/metrics_report.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::string section = "all";
  std::vector<std::string> phase_map;
  std::size_t top = 0;
  std::optional<std::int64_t> rank;
};

int metrics(const Options& a) {
  Format format = parse_format(a.format);
  std::vector<std::string> sections = parse_metrics_sections(a.section);
  if (format == Format::kCsv && sections.size() != 1)
    throw Error("csv holds one table: name it with --section", kUsageError);
  std::vector<PhaseMapping> mappings;
  for (const std::string& m : a.phase_map) mappings.push_back(parse_phase_mapping(m));
  ProfileFile file = open_for_report(a.file, a.rank, format);
  // A glob that names no routine changes nothing, which read as if it had applied.
  for (std::size_t i = 0; i < mappings.size(); ++i) {
    bool matched = false;
    for (auto st = file.prepare("SELECT name FROM routines"); !matched && st.step();)
      matched = mapping_matches(mappings[i], st.text(0));
    if (!matched)
      std::cerr << "sonde metrics: --phase " << a.phase_map[i] << " matches no routine of "
                << a.file << "\n";
  }
  MetricsReport report = compute_metrics_report(file, mappings);
  switch (format) {
    case Format::kText: {
      std::string text = render_metrics_text(report, sections, a.top);
      std::cout << (colour_wanted(stdout) ? colour_metrics(text) : text);
      break;
    }
    case Format::kCsv:
      std::cout << render_csv(metrics_section_table(report, sections[0], a.top));
      break;
    case Format::kJson:
      print_json("metrics", a.file, render_metrics_json(report, sections, a.top));
      break;
  }
  return 0;
}
}  // namespace

Command add_metrics(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "metrics",
      "Derived metrics: roofline per routine, time per phase, iteration breakdown "
      "(t_io t_h2d t_f t_b t_u t_comm), counter metrics (IPC, miss rates), GPU "
      "kernels (TAU's warps/instruction and global loads/instruction x time), CUDA "
      "graph replays by capture path");
  add_file(cmd, a->file);
  cmd->add_option("--section", a->section,
                  "all, roofline, phases, breakdown, counters, kernels or graphs")
      ->capture_default_str();
  cmd->add_option("-n,--top", a->top, "Rows per table, largest first (0: all)")
      ->check(count_check())
      ->capture_default_str();
  cmd->add_option("--phase", a->phase_map,
                  "CLASS=GLOB: routines matching GLOB count as that breakdown class "
                  "(t_io, t_h2d, t_f, t_b, t_u, t_comm); repeatable");
  add_rank(cmd, a->rank);
  add_format(cmd, a->format, {"text", "csv", "json"});
  add_colour(cmd);
  return {cmd, [a] { return metrics(*a); }};
}

}  // namespace sonde::cli
