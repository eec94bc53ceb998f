// sonde view-bundle (hidden): the JSON document the browser viewer shows, on stdout; for
// developing and testing the viewer's pages without the server.
#include "view/view_bundle.hpp"

#include <iostream>
#include <memory>

#include "cli/command.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

Command add_view_bundle(CLI::App& app) {
  auto files = std::make_shared<std::vector<std::string>>();
  auto* cmd = app.add_subcommand("view-bundle", "The viewer's data (JSON) for one or two profiles");
  cmd->group("");  // hidden: `sonde view` serves the same document
  cmd->add_option("files", *files, "One profile, or two (before, after) for the diff")
      ->required()
      ->expected(1, 2);
  return {cmd, [files] {
            std::cout << ViewData(*files).whole() << '\n';
            return 0;
          }};
}

}  // namespace sonde::cli
