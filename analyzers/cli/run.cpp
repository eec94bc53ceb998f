// sonde run: run a command with libsonde.so preloaded (the launcher is analyzers/programs).
#include <algorithm>
#include <memory>

#include "cli/command.hpp"
#include "profile/hotspots.hpp"
#include "programs/launcher.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {
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
    if (arg == "-o" || arg == "--output" || arg == "--flush-interval" || arg == "--counters" ||
        arg == "--report" || arg == "--sample" || arg == "--delay" || arg == "--steps" ||
        arg == "--step-region")
      ++i;
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
  cmd->add_flag("--trace", a->trace, "Also record every call as a timed event (SONDE_TRACE=1)");
  cmd->add_flag("--python", a->python,
                "Record Python frames, torch operators and torch.distributed collectives in "
                "every Python interpreter of the run, as python3 -m sonde does (torchrun's "
                "workers included)");
  cmd->add_option("--flush-interval", a->flush_interval,
                  "Seconds between periodic flushes: 0 (only at exit) or 0.1 to 1e6 "
                  "(SONDE_FLUSH_INTERVAL); another value is refused with a warning");
  cmd->add_flag("--no-record-args", a->no_record_args,
                "Record the program's name only, not its arguments (SONDE_RECORD_ARGS=0)");
  cmd->add_option("--counters", a->counters, "Comma-separated PAPI events (SONDE_COUNTERS)");
  cmd->add_flag("--adaptive", a->adaptive,
                "Time only 1 call in 16 of tiny hot call paths, scaled, counts exact "
                "(SONDE_ADAPTIVE=1)");
  cmd->add_option("--sample", a->sample_hz,
                  "Also sample each thread's CPU time N times a second, with native stacks, "
                  "marked as sampled apart from the exact figures (SONDE_SAMPLE_HZ)");
  cmd->add_option("--delay", a->delay,
                  "Measure nothing until S seconds after this launch (one deadline for every "
                  "process of the run), then every call exactly (SONDE_DELAY)");
  cmd->add_option("--steps", a->steps,
                  "Measure nothing until N steps have run: the window opens as the region named "
                  "by --step-region begins for the (N+1)-th time (SONDE_STEPS)");
  cmd->add_option("--step-region", a->step_region,
                  "The region --steps counts (default 'step'; SONDE_STEP_REGION)");
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
    return run_command_words().empty() ? std::string("no command given") : std::string();
  };
  return c;
}

}  // namespace sonde::cli
