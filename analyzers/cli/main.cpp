// The `sonde` command: parses the command line and hands the subcommand to the analyzers
// library. Nothing is computed here; each subcommand is one file of this folder.
#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "base/deep_stack.hpp"
#include "base/table_format.hpp"
#include "cli/command.hpp"
#include "cli/did_you_mean.hpp"
#include "sonde/output_name.hpp"
#include "sonde/quiet_write.hpp"
#include "store/schema_version.hpp"

using namespace sonde::cli;

namespace {
// The last word on a failure: a stderr that is closed or a broken pipe must not turn it into an
// abort (fmt throws there) or a death by SIGPIPE.
void say_error(const std::string& line) { sonde::quiet_write(STDERR_FILENO, line); }
// A first word that is no option and no command: one line, with the command meant when a
// typo is near one (`sonde reprot`), instead of CLI11's whole help.
std::string unknown_command(const CLI::App& app, const std::vector<std::string>& args) {
  if (args.empty() || args[0].empty() || args[0][0] == '-') return "";
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->get_name() == args[0]) return "";
    if (!sub->get_group().empty()) names.push_back(sub->get_name());  // hidden ones: no group
  }
  std::string out =
      fmt::format("sonde: '{}' is not a sonde command", sonde::analyzers::visible(args[0]));
  if (auto meant = nearest_name(args[0], names)) out += fmt::format("; did you mean '{}'?", *meant);
  return out + " (sonde --help lists them)\n";
}

// A command that reads one profile given several that exist (`sonde ranks p.rank*.db`, what a
// user types after torchrun): CLI11 said only "The following argument was not expected".
// Where they are ranks' files, the merge that reads them as one; else diff's two sides too.
std::string several_profiles(const CLI::App* sub, const std::vector<std::string>& extras) {
  if (sub == nullptr || sub->get_option_no_throw("file") == nullptr) return "";
  const auto* file = sub->get_option_no_throw("file");
  std::vector<std::string> files;
  if (!file->results().empty()) files.push_back(file->results().front());
  files.insert(files.end(), extras.begin(), extras.end());
  std::error_code ec;
  if (files.size() < 2 || !std::all_of(files.begin(), files.end(), [&](const std::string& f) {
        return std::filesystem::is_regular_file(f, ec);
      }))
    return "";
  std::string name = sub->get_name(), list;
  for (const std::string& f : files) list += " " + sonde::analyzers::visible(f);
  bool ranks = std::all_of(files.begin(), files.end(), &sonde::is_any_rank_output);
  if (ranks) {
    std::string merged = sonde::output_name_detail::untagged(files[0], "rank", true);
    merged = sonde::output_name_detail::tagged(merged, ".merged");
    return fmt::format(
        "sonde {0}: reads one profile, and was given {1}; ranks' files read as one once merged:"
        " sonde merge -o {2}{3}, then sonde {0} {2}{4}\n",
        name, files.size(), sonde::analyzers::visible(merged), list,
        name == "ranks" ? "" : " (--rank R for one rank's)");
  }
  return fmt::format(
      "sonde {0}: reads one profile, and was given {1}: one at a time, or sonde diff A B to "
      "compare two, or sonde merge -o merged.db{2} for ranks' files of one run\n",
      name, files.size(), list);
}

// "sonde report": how every usage error names the command it is about.
std::string command_name(const CLI::App& app) {
  auto subs = app.get_subcommands();
  return subs.empty() ? "sonde" : "sonde " + subs.front()->get_name();
}

// A word of the command line that begins with '-' and is a file here: CLI11 read it as an
// option, and said "file is required" or "argument was not expected" of a command given its
// file (`sonde report -dash.db`, a red-team find). "" where none is.
std::string dash_file_hint(const CLI::App& app, const std::vector<std::string>& args) {
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-' || a == "--") continue;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(a, ec)) continue;
    std::string who = command_name(app);
    return fmt::format(
        "{0}: {1} reads as an option, not as the file of that name here: give it as ./{1} "
        "(see {0} --help)\n",
        who, sonde::analyzers::visible(a));
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sonde: where the time of a deep-learning workload goes", "sonde"};
  app.set_version_flag("--version", fmt::format("sonde {} (reads profile schema up to version {})",
                                                SONDE_VERSION, sonde::kSchemaVersion));
  app.require_subcommand(0, 1);
  app.footer(
      "Exit codes: 0 success, 1 error (unreadable profile, bad SQL), 2 usage error.\n"
      "sonde run exits with the command's status (128+N if killed by signal N, 127 if "
      "not found).");
  std::vector<Command> commands = {
      add_report(app),     add_tree(app),       add_shapes(app),    add_query(app), add_export(app),
      add_candidates(app), add_metrics(app),    add_diff(app),      add_merge(app), add_ranks(app),
      add_scaling(app),    add_run(app),        add_calibrate(app), add_tune(app),  add_view(app),
      add_env_table(app),  add_view_bundle(app)};

  // One line, named as sonde's other errors are ("sonde report: ..."): CLI11's own was the
  // message alone with a second line under it.
  app.failure_message([](const CLI::App* a, const CLI::Error& e) {
    std::string who = command_name(*a);
    return fmt::format("{}: {} (see {} --help)\n", who, sonde::analyzers::visible(e.what()), who);
  });
  auto usage_error = [&](const CLI::Error& e) {
    int rc = app.exit(e);  // prints CLI11's message, or the help for --help
    return rc == 0 ? 0 : kUsageError;
  };
  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::string problem = unknown_command(app, args); !problem.empty()) {
    say_error(problem);
    return kUsageError;
  }
  set_run_command(split_run_command(args));
  split_tune_command(args);
  split_diff_sides(args);
  const std::vector<std::string> given = args;
  std::reverse(args.begin(), args.end());  // CLI11 takes a vector last-argument-first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp& e) {
    return usage_error(e);
  } catch (const CLI::CallForVersion& e) {
    return usage_error(e);
  } catch (const CLI::ExtrasError& e) {
    auto subs = app.get_subcommands();
    if (std::string hint =
            several_profiles(subs.empty() ? nullptr : subs.front(), app.remaining(true));
        !hint.empty()) {
      say_error(hint);
      return kUsageError;
    }
    if (std::string hint = dash_file_hint(app, given); !hint.empty()) {
      say_error(hint);
      return kUsageError;
    }
    return usage_error(e);
  } catch (const CLI::ParseError& e) {
    if (std::string hint = dash_file_hint(app, given); !hint.empty()) {
      say_error(hint);
      return kUsageError;
    }
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
  // An empty file name ("-o $OUT" of an unset variable) was "writing  failed", "cannot rename
  // .merging.N to", "cannot write : Success" or an internal error, by command (a red-team nit).
  for (const char* option : {"--output", "--html"}) {
    const CLI::Option* o = chosen->get_option_no_throw(option);
    if (o != nullptr && o->count() > 0 && !o->results().empty() && o->results().front().empty()) {
      std::cerr << "sonde " << name << ": " << option
                << " names no file (an empty value) (see sonde " << name << " --help)\n";
      return kUsageError;
    }
  }
  if (std::string problem = command->check(); !problem.empty()) {
    // One line, as every usage error: `sonde run` alone printed its 77-line help under it.
    std::cerr << "sonde " << name << ": " << problem << " (see sonde " << name << " --help)\n";
    return kUsageError;
  }
  try {
    // The readers walk call trees as deep as SONDE_MAX_DEPTH allows, some recursively: on a
    // stack of their own (base/deep_stack.hpp). Not run and tune, whose main thread takes
    // the signals meant for their command, nor calibrate, which may start itself again.
    int rc = 0;
    if (name == "run" || name == "tune" || name == "calibrate")
      rc = command->run();
    else
      sonde::analyzers::on_deep_stack([&] { rc = command->run(); });
    // What a command printed must have reached its stdout: `> /dev/full`, a `ulimit -f` that
    // cut `report --format json` at 2048 bytes, a full disk all exited 0 (a red-team find).
    // `sonde run` exits with its command's status and writes nothing of its own there.
    if (name != "run") {
      std::cout.flush();
      errno = 0;
      bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.bad();
      if (failed) {
        int err = errno;
        say_error(fmt::format("sonde {}: cannot write its output: {}\n", name,
                              err ? std::strerror(err) : "a write to stdout failed"));
        return rc == 0 ? 1 : rc;
      }
    }
    return rc;
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
