// sonde tune: the program re-run with each tuning knob, the measured tuning-stage table.
#include "programs/tune.hpp"

#include <fmt/format.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "advice/tune_results.hpp"
#include "cli/command.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

namespace {

std::vector<std::string>& tune_command_words() {
  static std::vector<std::string> words;
  return words;
}

struct Options {
  TuneOptions tune;
  std::string stages;
  std::string format = "text";
};

int tune(Options& a) {
  Format format = parse_format(a.format);
  a.tune.command = tune_command_words();
  std::vector<std::string> known = tune_stage_names();
  for (std::size_t start = 0; start < a.stages.size();) {
    std::size_t end = std::min(a.stages.find(',', start), a.stages.size());
    std::string name = a.stages.substr(start, end - start);
    if (std::find(known.begin(), known.end(), name) == known.end())
      throw Error(fmt::format("unknown stage '{}' (stages: {})", name, fmt::join(known, ", ")),
                  kUsageError);
    a.tune.stages.push_back(name);
    start = end + 1;
  }
  TuneResult result = run_tune(a.tune);
  // Kept beside the profiles, where `sonde candidates` finds it (advice/tune_results.hpp).
  std::string kept = (std::filesystem::path(a.tune.output_dir) / kTuneResultFile).string();
  std::ofstream(kept) << dump_json(render_tune_json(result)) << '\n';
  if (format == Format::kJson)
    print_json("tune", "", render_tune_json(result));
  else if (format == Format::kCsv)
    std::cout << render_csv(tune_table(result));
  else
    std::cout << render_tune_text(result);
  if (result.interrupted_by) {  // ends as the signal would have ended it, the result written
    std::cout.flush();
    ::signal(result.interrupted_by, SIG_DFL);
    ::raise(result.interrupted_by);
    return 128 + result.interrupted_by;
  }
  return 0;
}

}  // namespace

std::vector<std::string> split_tune_command(std::vector<std::string>& args) {
  if (args.empty() || args[0] != "tune") return {};
  auto dash = std::find(args.begin(), args.end(), "--");
  if (dash == args.end()) return {};
  std::vector<std::string> command(dash + 1, args.end());
  args.erase(dash, args.end());
  tune_command_words() = command;
  return command;
}

Command add_tune(CLI::App& app) {
  auto a = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "tune", "Re-run a command with each tuning knob and print the measured tuning-stage table");
  cmd->description(
      "Re-run a command under sonde as it is and with each tuning knob (one "
      "profile per run in -o DIR), and print the measured tuning-stage table: "
      "sonde tune [OPTIONS] -- COMMAND [ARGS...]");
  cmd->add_option("--repeat", a->tune.repeat, "Runs per stage, interleaved with the original's")
      ->capture_default_str()
      ->check(whole_check("a number of runs (1 to 100)", 1, 100));
  cmd->add_option("--stages", a->stages,
                  "Comma-separated stages: blas-threads (OPENBLAS/MKL/OMP_NUM_THREADS = cores), "
                  "framework-threads (OMP_NUM_THREADS, torch's intra-op threads), blas-kernels "
                  "(OPENBLAS_CORETYPE = the CPU's core), ftz (SONDE_FTZ=1), pinning "
                  "(OMP_PROC_BIND/OMP_PLACES), all (every stage that was "
                  "faster, together). Default: every stage that applies here, then all");
  cmd->add_option("-o,--output", a->tune.output_dir, "Folder of the runs' profiles and outputs")
      ->capture_default_str();
  cmd->add_option("--timeout", a->tune.timeout_s,
                  "Seconds after which a run is stopped and its stage reported as failed (0: none)")
      ->check(seconds_check(1e6));
  add_format(cmd, a->format, {"text", "csv", "json"});
  Command c{cmd, [a] { return tune(*a); }};
  c.check = [] {
    return tune_command_words().empty() ? std::string(
                                              "no command given (sonde tune [OPTIONS] -- "
                                              "COMMAND ...)")
                                        : std::string();
  };
  return c;
}

}  // namespace sonde::cli
