// One subcommand of `sonde`: each cli/<name>.cpp declares its options on its own CLI11
// subcommand and returns what runs it, so a subcommand is read (and changed) in one file.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "profile/profile_file.hpp"

namespace sonde::cli {

inline constexpr int kUsageError = 2;

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
  // Checks between options that CLI11 cannot express; returns a message, or "" when fine.
  std::function<std::string()> check = [] { return std::string(); };
};

// The subcommands, in the order `sonde --help` lists them.
Command add_report(CLI::App& app);
Command add_tree(CLI::App& app);
Command add_shapes(CLI::App& app);
Command add_query(CLI::App& app);
Command add_export(CLI::App& app);
Command add_candidates(CLI::App& app);
Command add_metrics(CLI::App& app);
Command add_diff(CLI::App& app);
Command add_merge(CLI::App& app);
Command add_ranks(CLI::App& app);
Command add_scaling(CLI::App& app);
Command add_run(CLI::App& app);
Command add_calibrate(CLI::App& app);
Command add_tune(CLI::App& app);
Command add_view(CLI::App& app);
Command add_env_table(CLI::App& app);    // hidden: README.md's environment table
Command add_view_bundle(CLI::App& app);  // hidden: the viewer's JSON document

// `sonde run`'s command starts at "--" or at the first word that is neither an option nor an
// option's value; it is taken out of args before CLI11 sees them.
std::vector<std::string> split_run_command(std::vector<std::string>& args);
void set_run_command(std::vector<std::string> command);
// `sonde tune`'s command is what follows "--"; taken out of args likewise.
std::vector<std::string> split_tune_command(std::vector<std::string>& args);
// `sonde diff A1 A2 -- B1 B2`: the after side's files follow "--"; taken out of args likewise.
void split_diff_sides(std::vector<std::string>& args);

// Shared option helpers.
void add_file(CLI::App* cmd, std::string& file);
// --rank R: one rank of a merged or ranked profile (profile/rank_file.hpp).
void add_rank(CLI::App* cmd, std::optional<std::int64_t>& rank);
// The file, or one rank of it; read whole with several ranks, says so first (a text format's
// first line, else on stderr) so summed figures are never taken for one rank's.
analyzers::ProfileFile open_for_report(const std::string& path, std::optional<std::int64_t> rank,
                                       analyzers::Format format);
CLI::Option* add_format(CLI::App* cmd, std::string& format, std::vector<std::string> choices);
// --color auto|always|never, for the commands whose text is painted (render/colour.hpp).
void add_colour(CLI::App* cmd);
// The --format json envelope (base/table_format.hpp's kJsonFormatVersion); a list is under
// `list_key` ("rows"). docs/cli.md, JSON output.
void print_json(std::string_view command, const std::string& file, analyzers::Json body,
                std::string_view list_key = "rows");
void print_table(const analyzers::Table& table, analyzers::Format format, std::string_view command,
                 const std::string& file);
// CLI11 would read "-5" into a size_t as a huge count, and NaN passes its Range check.
const CLI::Validator& count_check();    // a whole number >= 0
const CLI::Validator& percent_check();  // a finite number from 0 to 100
// A whole number from `lowest` to `highest`; the message says "'V' is not WHAT".
CLI::Validator whole_check(std::string what, long long lowest = 0,
                           long long highest = std::numeric_limits<long long>::max());
CLI::Validator seconds_check(double highest);  // a finite number of seconds from 0

}  // namespace sonde::cli
