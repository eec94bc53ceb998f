// sonde shapes: GEMM-like calls per shape and call site, with GFLOP/s and % of peak.
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "render/shapes.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::size_t top = 0;
  std::optional<std::int64_t> rank;
};

int shapes(const Options& a) {
  Format format = parse_format(a.format);
  ProfileFile file = open_for_report(a.file, a.rank, format);
  std::vector<ShapeRow> rows = compute_shapes(file, a.top);
  if (rows.empty() && format == Format::kText) {
    std::cout << "no GEMM-like calls recorded\n";
    return 0;
  }
  print_table(shapes_table(rows), format);
  return 0;
}
}  // namespace

Command add_shapes(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("shapes", "GEMM-like calls per shape and call site, GFLOP/s");
  add_file(cmd, a->file);
  cmd->add_option("-n,--top", a->top, "Rows to show, by time (0: all)")
      ->check(count_check())->capture_default_str();
  add_rank(cmd, a->rank);
  add_format(cmd, a->format, {"text", "csv", "json"});
  return {cmd, [a] { return shapes(*a); }};
}

}  // namespace sonde::cli
