// `sonde run`: sets up the environment for libsonde.so and runs a command under it.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sonde::analyzers {

struct RunOptions {
  std::string output = "sonde.db";
  bool force = false;
  bool python = false;  // the Python hook in every interpreter of the run (PYTHONPATH)
  // SONDE_* variable -> value, from the options of sonde/run_options.hpp given.
  std::map<std::string, std::string> variables;
  std::optional<std::string> report_sort;  // print `sonde report --sort KEY` once it has ended
  std::vector<std::string> command;        // program and its arguments
};

// Runs the command and returns the exit status sonde should exit with: the child's status,
// 128 + signal when it was killed, 127 when it cannot be found. Setup problems throw Error.
int run_command(const RunOptions& options);

// Why `value` is no value of the SONDE_* variable a sonde run option sets (a number out of its
// range, or no number), "" where it is one: the option is then refused, exit 2.
std::string run_option_problem(std::string_view variable, const std::string& value);

// -o's absolute path, `what` naming it in the error: a relative one in a folder since removed (a
// shell left in it) was an internal error, "filesystem error: cannot make absolute path". An
// empty one is refused before (cli/main.cpp).
std::filesystem::path absolute_output(const std::string& output, std::string_view what);

// Where libsonde.so is: $SONDE_LIBRARY, else <dir of this executable>/../lib/libsonde.so.
std::string find_preload_library();

// PATH lookup as execvp does it; nullopt when nothing executable is found.
std::optional<std::string> resolve_command(const std::string& name);
// resolve_command's path, or an Error with a shell's status: 126 for a file that cannot be
// executed (its reason said), 127 for none found. `sonde run` and `sonde tune` alike.
std::string command_to_start(const std::string& name);

// The SONDE_* variables, one paragraph each, for `sonde run --help`.
std::string environment_help();

// The same as README.md's markdown table (`sonde env-table`).
std::string environment_markdown();

}  // namespace sonde::analyzers
