// `sonde view`'s HTTP server: the viewer's three files and the data, on 127.0.0.1 only, each
// only to a request that carries the run's random token (cpp-httplib does the HTTP).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "view/view_bundle.hpp"
#include "view/viewer_assets.hpp"

namespace sonde::analyzers {

// 128 bits from getrandom(2), as 32 hex digits. Throws Error when the kernel gives none.
std::string make_token();
// Compares in time independent of where they differ.
bool token_matches(std::string_view given, std::string_view token);

class ViewServer {
 public:
  explicit ViewServer(ViewerAssets assets);
  ~ViewServer();
  ViewServer(const ViewServer&) = delete;
  ViewServer& operator=(const ViewServer&) = delete;

  // Listens on 127.0.0.1:port (0: a free port); throws Error (exit 2) when it cannot.
  void bind(int port);
  // http://127.0.0.1:PORT/?token=T
  std::string url() const;
  // Serves `data` until SIGINT or SIGTERM: /data.json the whole bundle, ?part=index what it holds,
  // ?part=diff the diff, ?profile=I&part=NAME one part of a profile, each made when first asked.
  // `ready` runs once the signals are taken (so a script that reads the URL and sends SIGTERM gets
  // a clean exit); when it returns false (the URL could not be printed) the server stops at once.
  // Then, with `open`, the user's browser starts. Returns the exit status.
  int serve(std::shared_ptr<ViewData> data, bool open, const std::function<bool()>& ready);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sonde::analyzers
