// sonde ranks: load imbalance, communication share, bandwidth and overlap over a run's ranks.
#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "metrics/ranks.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::size_t top = 20;
};

int ranks(const Options& a) {
  Format format = parse_format(a.format);
  ProfileFile file = ProfileFile::open(a.file);
  RanksReport r = compute_ranks(file, a.top);
  if (format == Format::kJson)
    std::cout << dump_json(render_ranks_json(a.file, r)) << '\n';
  else
    std::cout << render_ranks_text(r);
  return 0;
}
}  // namespace

Command add_ranks(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "ranks", "Per rank: load imbalance, communication share, bandwidth, overlap");
  add_file(cmd, a->file);
  cmd->add_option("-n,--top", a->top, "Imbalance and bandwidth rows to show (0: all)")
      ->check(count_check())->capture_default_str();
  add_format(cmd, a->format, {"text", "json"});
  return {cmd, [a] { return ranks(*a); }};
}

}  // namespace sonde::cli
