// sonde candidates: tuning candidates from the advice rules, ranked by estimated gain.
#include <iostream>
#include <memory>

#include "advice/candidates.hpp"
#include "cli/command.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::size_t top = 0;
};

int candidates(const Options& a) {
  Format format = parse_format(a.format);
  ProfileFile file = ProfileFile::open(a.file);
  std::vector<Candidate> found = compute_candidates(file);
  if (format == Format::kJson)
    std::cout << dump_json(render_candidates_json(found, a.top)) << '\n';
  else if (format == Format::kCsv) std::cout << render_csv(candidates_table(found, a.top));
  else std::cout << render_candidates_text(found, a.top);
  return 0;
}
}  // namespace

Command add_candidates(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "candidates", "Tuning candidates from the advice rules, ranked by estimated gain");
  add_file(cmd, a->file);
  cmd->add_option("-n,--top", a->top, "Candidates to show, best first (0: all)")
      ->check(count_check())
      ->capture_default_str();
  add_format(cmd, a->format, {"text", "csv", "json"});
  return {cmd, [a] { return candidates(*a); }};
}

}  // namespace sonde::cli
