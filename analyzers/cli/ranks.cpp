// sonde ranks: load imbalance, communication share, bandwidth and overlap over a run's ranks.
#include "metrics/ranks.hpp"

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "cli/command.hpp"
#include "profile/launcher_file.hpp"
#include "render/ranks.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
struct Options {
  std::string file;
  std::string format = "text";
  std::string section;
  std::size_t top = 20;
};

int ranks(const Options& a) {
  Format format = parse_format(a.format);
  if (format == Format::kCsv && a.section.empty())
    throw Error("csv holds one table: name it with --section per_rank, imbalance or bandwidth",
                kUsageError);
  ProfileFile file = ProfileFile::open(a.file);
  if (auto note = launcher_file_note(file))
    throw Error(fmt::format("{} holds no rank's work: it is {}", visible(a.file), *note), 2);
  RanksReport r = compute_ranks(file, a.top);
  if (format == Format::kCsv) {
    for (const RanksSection& s : r.sections)
      if (s.id == a.section) {
        std::cout << render_csv(s.table);
        return 0;
      }
    throw Error("no such section '" + a.section + "' (per_rank, imbalance or bandwidth)",
                kUsageError);
  }
  if (format == Format::kJson)
    print_json("ranks", a.file, render_ranks_json(a.file, r));
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
      ->check(count_check())
      ->capture_default_str();
  cmd->add_option("--section", a->section,
                  "With --format csv, the one table: per_rank, imbalance or bandwidth");
  add_format(cmd, a->format, {"text", "csv", "json"});
  return {cmd, [a] { return ranks(*a); }};
}

}  // namespace sonde::cli
