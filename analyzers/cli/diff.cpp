// sonde diff: two profiles side by side, with speedups per phase, routine and GEMM shape.
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "metrics/diff.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string before, after;
  std::string format = "text";
};

int diff(const Options& a) {
  Format format = parse_format(a.format);
  ProfileDiff d = compute_diff(ProfileFile::open(a.before), ProfileFile::open(a.after));
  if (format == Format::kJson)
    std::cout << dump_json(render_diff_json(a.before, a.after, d)) << '\n';
  else if (format == Format::kCsv) std::cout << render_csv(diff_csv_table(d));
  else std::cout << render_diff_text(d);
  return 0;
}
}  // namespace

Command add_diff(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("diff", "Two profiles side by side: time per phase and routine "
                                         "with the speedup, GEMM GFLOP/s per shape");
  cmd->add_option("before", a->before, "Profile before the change")->required();
  cmd->add_option("after", a->after, "Profile after the change")->required();
  add_format(cmd, a->format, {"text", "csv", "json"});
  return {cmd, [a] { return diff(*a); }};
}

}  // namespace sonde::cli
