// sonde scaling: strong or weak scaling efficiency across runs of different rank or thread counts.
#include "metrics/scaling.hpp"

#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "render/scaling.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::vector<std::string> files;
  std::string format = "text";
  std::string section;
  std::size_t top = 15;
  bool weak = false;
};

int scaling(const Options& a) {
  Format format = parse_format(a.format);
  if (format == Format::kCsv && a.section != "runs" && a.section != "loop" &&
      a.section != "routines")
    throw Error("csv holds one table: name it with --section runs, loop or routines", kUsageError);
  Scaling s = compute_scaling(a.files, a.weak, a.top);
  for (const std::string& w : s.warnings) std::cerr << "sonde scaling: warning: " << w << "\n";
  if (format == Format::kCsv)
    std::cout << render_csv(a.section == "runs"   ? scaling_runs_table(s)
                            : a.section == "loop" ? scaling_loop_table(s)
                                                  : scaling_routines_table(s));
  else if (format == Format::kJson)
    print_json("scaling", "", render_scaling_json(s));
  else
    std::cout << render_scaling_text(s);
  return 0;
}
}  // namespace

Command add_scaling(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "scaling", "Strong or weak scaling efficiency across runs of different rank/thread counts");
  cmd->add_option("files", a->files,
                  "Profiles of one program at different rank or thread "
                  "counts (merged files for MPI runs)")
      ->required()
      ->expected(2, -1);
  cmd->add_flag("--weak", a->weak,
                "Weak scaling: each run has the same problem per worker (default: strong, the "
                "same global problem)");
  cmd->add_option("-n,--top", a->top, "Routines to show, by the reference run's time (0: all)")
      ->check(count_check())
      ->capture_default_str();
  cmd->add_option("--section", a->section,
                  "With --format csv, the one table: runs, loop or routines");
  add_format(cmd, a->format, {"text", "csv", "json"});
  return {cmd, [a] { return scaling(*a); }};
}

}  // namespace sonde::cli
