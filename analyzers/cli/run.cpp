// sonde run: run a command with libsonde.so preloaded (the launcher is analyzers/programs).
#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "cli/command.hpp"
#include "profile/hotspots.hpp"
#include "programs/launcher.hpp"
#include "sonde/run_options.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
// An option of sonde/run_options.hpp that takes its value as the next word.
bool takes_value(const std::string& arg) {
  return std::any_of(
      kRunVariableOptions.begin(), kRunVariableOptions.end(),
      [&](const RunVariableOption& o) { return o.flag == arg && o.flag_value.empty(); });
}

// Set before parsing: CLI11 never sees the command, whose options are its own.
std::vector<std::string>& run_command_words() {
  static std::vector<std::string> words;
  return words;
}
}  // namespace

std::vector<std::string> split_run_command(std::vector<std::string>& args) {
  if (args.empty() || args[0] != "run") return {};
  std::size_t i = 1;
  std::vector<std::string> command;
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
    if (arg.empty() || arg[0] != '-') {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (arg == "-o" || arg == "--output" || arg == "--report" || takes_value(arg)) ++i;
  }
  args.resize(std::min(i, args.size()));
  return command;
}

void set_run_command(std::vector<std::string> command) { run_command_words() = std::move(command); }

Command add_run(CLI::App& app) {
  auto a = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Run a command with libsonde.so preloaded");
  cmd->add_option("-o,--output", a->output, "Profile database to write")->capture_default_str();
  cmd->add_flag("--force", a->force,
                "Replace the output (and its -journal/-wal/-shm) if it exists");
  cmd->add_flag("--python", a->python,
                "Record Python frames, torch operators and torch.distributed collectives in "
                "every Python interpreter of the run, as python3 -m sonde does (torchrun's "
                "workers included)");
  for (const RunVariableOption& o : kRunVariableOptions) {
    std::string variable(o.variable), value(o.flag_value);
    if (value.empty()) {
      // A typo in --delay or --steps taken as the default profiled the whole run, start-up
      // included (a red-team find): a value the variable does not take is a usage error.
      cmd->add_option_function<std::string>(
             std::string(o.flag),
             [a, variable](const std::string& v) { a->variables[variable] = v; },
             std::string(o.help))
          ->check(CLI::Validator(
              [variable](std::string& v) {
                std::string why = run_option_problem(variable, v);
                return why.empty() ? why : fmt::format("'{}' is {}", v, why);
              },
              "VALUE"));
    } else {
      cmd->add_flag_callback(
          std::string(o.flag), [a, variable, value] { a->variables[variable] = value; },
          std::string(o.help));
    }
  }
  cmd->add_option("--report", a->report_sort,
                  "Print the flat profile (sonde report --sort KEY) on stdout when the command "
                  "has ended, as python3 -m cProfile prints its table")
      ->check(CLI::IsMember(report_sort_names()));
  cmd->description(
      "Run a command with libsonde.so preloaded: sonde run [OPTIONS] [--] COMMAND [ARGS...]");
  cmd->footer(environment_help());
  Command c{cmd, [a] {
              a->command = run_command_words();
              return run_command(*a);
            }};
  c.check = [] {
    return run_command_words().empty()
               ? std::string("no command given (sonde run [OPTIONS] [--] COMMAND [ARGS...])")
               : std::string();
  };
  return c;
}

}  // namespace sonde::cli
