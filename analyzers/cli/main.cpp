// The `sonde` command: parses the command line and hands the subcommand to the analyzers
// library. Nothing is computed here; each subcommand is one file of this folder.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <iostream>

#include "cli/command.hpp"
#include "render/table_format.hpp"
#include "sonde/quiet_write.hpp"
#include "store/schema_version.hpp"

using namespace sonde::cli;

namespace {
// The last word on a failure: a stderr that is closed or a broken pipe must not turn it into an
// abort (fmt throws there) or a death by SIGPIPE.
void say_error(const std::string& line) { sonde::quiet_write(STDERR_FILENO, line); }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sonde: where the time of a deep-learning workload goes", "sonde"};
  app.set_version_flag("--version", fmt::format("sonde {} (reads profile schema up to version {})",
                                                SONDE_VERSION, sonde::kSchemaVersion));
  app.require_subcommand(0, 1);
  app.footer("Exit codes: 0 success, 1 error (unreadable profile, bad SQL), 2 usage error.\n"
             "sonde run exits with the command's status (128+N if killed by signal N, 127 if "
             "not found).");
  std::vector<Command> commands = {add_report(app),     add_tree(app),    add_shapes(app),
                                   add_query(app),      add_export(app),  add_candidates(app),
                                   add_metrics(app),    add_diff(app),    add_merge(app),
                                   add_ranks(app),      add_scaling(app), add_run(app),
                                   add_calibrate(app),  add_tune(app),    add_view(app),
                                   add_env_table(app),
                                   add_view_bundle(app)};

  auto usage_error = [&](const CLI::Error& e) {
    int rc = app.exit(e);  // prints CLI11's message, or the help for --help
    return rc == 0 ? 0 : kUsageError;
  };
  std::vector<std::string> args(argv + 1, argv + argc);
  set_run_command(split_run_command(args));
  split_tune_command(args);
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last-argument-first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return usage_error(e);
  } catch (const CLI::CallForVersion& e) {
    return usage_error(e);
  } catch (const CLI::ParseError& e) {
    if (app.get_subcommands().empty()) std::cerr << app.help();
    return usage_error(e);
  }
  if (app.get_subcommands().empty()) {
    std::cerr << app.help();
    return kUsageError;
  }
  CLI::App* chosen = app.get_subcommands().front();
  auto command = std::find_if(commands.begin(), commands.end(),
                              [&](const Command& c) { return c.app == chosen; });
  std::string name = chosen->get_name();
  // A file-size limit fails the analyzers' writes (reported) instead of killing them; `sonde run`
  // leaves the host's disposition alone.
  if (name != "run") ::signal(SIGXFSZ, SIG_IGN);
  if (std::string problem = command->check(); !problem.empty()) {
    std::cerr << "sonde " << name << ": " << problem << '\n';
    if (name == "run") std::cerr << chosen->help();  // the usage line is the help there
    return kUsageError;
  }
  try {
    return command->run();
  } catch (const sonde::analyzers::Error& e) {
    std::cout.flush();
    // One line whatever the message holds: a path with a newline split it into two.
    say_error(fmt::format("sonde {}: {}\n", name, sonde::analyzers::visible(e.what())));
    return e.exit_code();
  } catch (const std::exception& e) {
    say_error(
        fmt::format("sonde {}: internal error: {}\n", name, sonde::analyzers::visible(e.what())));
    return 1;
  } catch (...) {
    say_error(fmt::format("sonde {}: internal error\n", name));
    return 1;
  }
}
