#include "cli/view_serve.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>

#include "view/view_server.hpp"
#include "view/viewer_assets.hpp"

namespace sonde::cli {

using namespace sonde::analyzers;

int serve_view(const std::vector<std::string>& files, int port, bool open) {
  ViewServer server(load_viewer_assets(find_viewer_dir()));
  server.bind(port);
  // The parts are made when the page asks for them, the first panel's first: the URL is
  // printed as soon as the files are open.
  std::shared_ptr<ViewData> data = open_view_profiles(files);
  // Nobody could open a viewer whose URL went nowhere (a full disk, a closed pipe): it says so
  // and stops rather than serve unseen.
  auto announce = [&] {
    std::cout << server.url() << std::endl;
    if (std::cout) return true;
    fmt::print(stderr, "sonde view: cannot print the URL on standard output: {}\n",
               std::strerror(errno ? errno : EIO));
    return false;
  };
  return server.serve(std::move(data), open, announce);
}

}  // namespace sonde::cli
