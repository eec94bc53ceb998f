// `sonde view`'s serving half, in its own executable (sonde-view-server): the HTTP server
// (cpp-httplib, and with it OpenSSL) costs 5-7 ms at every process start, which no other
// command should pay. `sonde view` parses the command line and execs it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "view/view_bundle.hpp"

namespace sonde::cli {

// The profiles opened, each checked now; one that cannot be read is the user's input: exit 2.
inline std::shared_ptr<analyzers::ViewData> open_view_profiles(
    const std::vector<std::string>& files) {
  try {
    return std::make_shared<analyzers::ViewData>(files);
  } catch (const analyzers::Error& e) {
    throw analyzers::Error(e.what(), kUsageError);
  }
}

// The profiles served on 127.0.0.1:port (0: any free port) until SIGINT or SIGTERM; the URL
// is printed on standard output. Returns the exit status; throws analyzers::Error.
int serve_view(const std::vector<std::string>& files, int port, bool open);

// argv for sonde-view-server: what serve_view needs, in the form its main
// (cli/view_server_main.cpp) reads.
inline std::vector<std::string> view_server_args(const std::vector<std::string>& files, int port,
                                                 bool open) {
  std::vector<std::string> args = {"--port", std::to_string(port)};
  if (open) args.push_back("--open");
  args.push_back("--");
  args.insert(args.end(), files.begin(), files.end());
  return args;
}

}  // namespace sonde::cli
