// Option helpers shared by the subcommands.
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <utility>

#include "cli/command.hpp"
#include "profile/rank_file.hpp"
#include "render/colour.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

void add_file(CLI::App* cmd, std::string& file) {
  cmd->add_option("file", file, "Profile database written by sonde run / libsonde.so")->required();
}

void add_rank(CLI::App* cmd, std::optional<std::int64_t>& rank) {
  cmd->add_option("--rank", rank,
                  "Only this rank (of a merged or ranked profile), as its own file would read; "
                  "default: all ranks, summed")
      ->check(whole_check("a rank (a whole number >= 0)"));
}

ProfileFile open_for_report(const std::string& path, std::optional<std::int64_t> rank,
                            Format format) {
  ProfileFile file = open_profile(path, rank);
  if (!rank) {
    if (std::optional<std::string> note = all_ranks_note(file))
      (format == Format::kText ? std::cout : std::cerr) << *note << '\n';
  }
  return file;
}

void add_colour(CLI::App* cmd) {
  cmd->add_option_function<std::string>(
         "--color", [](const std::string& when) { set_colour_mode(colour_mode_named(when)); },
         "Colour the text: auto (on a terminal, unless NO_COLOR is set; CLICOLOR_FORCE=1 "
         "off one too), always (a pipe or a file too: less -R, CI logs) or never")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->default_str("auto");
}

CLI::Option* add_format(CLI::App* cmd, std::string& format, std::vector<std::string> choices) {
  return cmd->add_option("-f,--format", format, "Output format")
      ->check(CLI::IsMember(choices))
      ->capture_default_str();
}

CLI::Validator whole_check(std::string what, long long lowest, long long highest) {
  // CLI11's own Range and NonNegativeNumber said "Value -1 not in range 0.000000 to 1797...
  // (300 digits)" and "Could not convert: --depth = 1.5" (a red-team find).
  return CLI::Validator(
      [what, lowest, highest](std::string& v) -> std::string {
        char* end = nullptr;
        errno = 0;
        long long n = std::strtoll(v.c_str(), &end, 10);
        bool ok = !v.empty() && *end == '\0' && errno == 0 && n >= lowest && n <= highest;
        return ok ? "" : "'" + v + "' is not " + what;
      },
      "NUMBER");
}

namespace {

// A finite number from 0 to `highest`; the message says "'V' is not WHAT".
CLI::Validator finite_check(std::string what, double highest, std::string label) {
  return CLI::Validator(
      [what, highest](std::string& v) -> std::string {
        char* end = nullptr;
        double d = std::strtod(v.c_str(), &end);
        bool ok = !v.empty() && *end == '\0' && std::isfinite(d) && d >= 0 && d <= highest;
        return ok ? "" : "'" + v + "' is not " + what;
      },
      std::move(label));
}

}  // namespace

CLI::Validator seconds_check(double highest) {
  return finite_check(fmt::format("a number of seconds (0 to {:.0f})", highest), highest,
                      "SECONDS");
}

const CLI::Validator& count_check() {
  static const CLI::Validator check =
      whole_check("a count (a whole number >= 0; 0: all)").description("COUNT");
  return check;
}

const CLI::Validator& percent_check() {
  static const CLI::Validator check = finite_check("a percentage (0 to 100)", 100, "PERCENT");
  return check;
}

void print_json(std::string_view command, const std::string& file, Json body,
                std::string_view list_key) {
  Json out = Json::object();
  out["format_version"] = kJsonFormatVersion;
  out["subcommand"] = command;
  if (!file.empty()) out["file"] = file;
  if (body.is_array()) {
    out[std::string(list_key)] = std::move(body);
  } else {
    // The envelope's keys are none of a command's own ("command" is tune's program, "file"
    // is report's, the same file): a command's key is kept over the envelope's.
    for (auto& [key, value] : body.items()) out[key] = std::move(value);
  }
  std::cout << dump_json(out) << '\n';
}

void print_table(const Table& table, Format format, std::string_view command,
                 const std::string& file) {
  switch (format) {
    case Format::kText:
      std::cout << render_text(table);
      break;
    case Format::kCsv:
      std::cout << render_csv(table);
      break;
    case Format::kJson:
      print_json(command, file, render_json(table));
      break;
  }
}

}  // namespace sonde::cli
