// Option helpers shared by the subcommands.
#include <iostream>

#include "cli/command.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

void add_file(CLI::App* cmd, std::string& file) {
  cmd->add_option("file", file, "Profile database written by sonde run / libsonde.so")->required();
}

CLI::Option* add_format(CLI::App* cmd, std::string& format, std::vector<std::string> choices) {
  return cmd->add_option("-f,--format", format, "Output format")
      ->check(CLI::IsMember(choices))
      ->capture_default_str();
}

void print_table(const Table& table, Format format) {
  switch (format) {
    case Format::kText: std::cout << render_text(table); break;
    case Format::kCsv: std::cout << render_csv(table); break;
    case Format::kJson: std::cout << render_json(table).dump(2) << '\n'; break;
  }
}

}  // namespace sonde::cli
