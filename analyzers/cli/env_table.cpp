// sonde env-table (hidden): the environment variables of options.hpp as README.md's markdown
// table; tests/e2e/test_readme_env.py fails when README.md differs from it.
#include <iostream>

#include "cli/command.hpp"
#include "programs/launcher.hpp"

namespace sonde::cli {

Command add_env_table(CLI::App& app) {
  auto* cmd = app.add_subcommand("env-table", "")->group("");
  return Command{cmd, [] {
                   std::cout << analyzers::environment_markdown();
                   return 0;
                 }};
}

}  // namespace sonde::cli
