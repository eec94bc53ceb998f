// sonde candidates: tuning candidates from the advice rules, ranked by estimated gain.
#include "advice/candidates.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "advice/tune_results.hpp"
#include "cli/command.hpp"
#include "profile/run_summary.hpp"
#include "render/candidates.hpp"
#include "render/colour.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::size_t top = 0;
  std::string tune;  // a sonde tune folder or its tune.json
  std::optional<std::int64_t> rank;
};

int candidates(const Options& a) {
  Format format = parse_format(a.format);
  ProfileFile file = open_for_report(a.file, a.rank, format);
  AdviceInput input = load_advice_input(file);
  std::vector<Candidate> found = evaluate_rules(input, rules());
  std::string base = share_base_text(input.metrics);
  // A profile of sonde tune's own folder learns from that folder's result unasked.
  std::optional<TuneResults> tune =
      a.tune.empty() ? tune_results_beside(a.file) : std::optional(read_tune_results(a.tune));
  std::vector<std::string> unpredicted;
  if (tune) {
    unpredicted = apply_tune_results(found, *tune);
    std::string other = tune_of_another_command(*tune, load_run_summary(file).command);
    if (!other.empty()) {
      unpredicted.insert(unpredicted.begin(), other);
      std::cerr << "sonde candidates: " << other << '\n';
    }
  }
  std::vector<std::string> warnings = peaks_exceeded(file);
  // A job a signal ended (a hang killed at its time limit) is no profile of the work to tune:
  // a red-team DDP job whose rank 1 hung 294 s read "even out the work per rank", 147 s.
  std::size_t signalled = 0;
  for (const Note& n : load_run_summary(file).notes) signalled += n.topic == "signal";
  if (signalled > 0)
    warnings.insert(
        warnings.begin(),
        fmt::format("{} of the run's processes {} ended by a signal (sonde report names {}): "
                    "the figures stop there, and the time of a job killed for a hang or at a "
                    "time limit is its waiting, not work to even out",
                    signalled, signalled == 1 ? "was" : "were", signalled == 1 ? "it" : "them"));
  if (format != Format::kText)
    for (const std::string& w : warnings) std::cerr << "sonde candidates: warning: " << w << '\n';
  if (format == Format::kJson) {
    Json out{{"candidates", render_candidates_json(found, a.top)},
             {"warnings", warnings},
             {"share_base",
              {{"busy_s", 1e-9 * double(input.metrics.total_ns)},
               {"setup_s", 1e-9 * double(input.metrics.setup_ns)},
               {"base_s", 1e-9 * double(input.metrics.share_base_ns())}}}};
    if (tune) {
      out["tune"] = tune->path;
      out["unpredicted"] = unpredicted;
    }
    print_json("candidates", a.file, std::move(out));
  } else if (format == Format::kCsv) {
    std::cout << render_csv(candidates_table(found, a.top));
  } else {
    for (const std::string& w : warnings) std::cout << "warning: " << w << '\n';
    std::string text = render_candidates_text(found, a.top);
    std::cout << (colour_wanted(stdout) ? colour_candidates(text) : text);
    for (const std::string& line : unpredicted) std::cout << line << '\n';
    if (!base.empty()) std::cout << base << '\n';
  }
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
  cmd->add_option("--tune", a->tune,
                  "A sonde tune folder (or its tune.json): each rule's estimate is held against "
                  "the gain tune measured for the stage that tests it. Default: the tune.json "
                  "beside FILE when FILE is one of its runs");
  add_rank(cmd, a->rank);
  add_format(cmd, a->format, {"text", "csv", "json"});
  add_colour(cmd);
  return {cmd, [a] { return candidates(*a); }};
}

}  // namespace sonde::cli
