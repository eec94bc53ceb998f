// sonde-view-server: what `sonde view` execs to serve (cli/view_serve.hpp says why apart).
// Its command line is view_server_args'; its messages are `sonde view`'s.
#include <fmt/format.h>

#include <charconv>
#include <cstring>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/view_serve.hpp"

int main(int argc, char** argv) {
  int port = 0;
  bool open = false;
  std::vector<std::string> files;
  bool usage = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      files.assign(argv + i + 1, argv + argc);
      break;
    }
    if (std::strcmp(argv[i], "--open") == 0) {
      open = true;
    } else if (std::strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
      const char* p = argv[++i];
      auto [end, ec] = std::from_chars(p, p + std::strlen(p), port);
      usage |= ec != std::errc() || *end != '\0' || port < 0 || port > 65535;
    } else {
      usage = true;
    }
  }
  if (usage || files.empty()) {
    fmt::print(stderr,
               "sonde-view-server: run by `sonde view FILES...`; see `sonde view --help`\n");
    return sonde::cli::kUsageError;
  }
  try {
    return sonde::cli::serve_view(files, port, open);
  } catch (const sonde::analyzers::Error& e) {
    fmt::print(stderr, "sonde view: {}\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    fmt::print(stderr, "sonde view: internal error: {}\n", e.what());
    return 1;
  }
}
