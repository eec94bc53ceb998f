#include "view/viewer_assets.hpp"

#include <fmt/format.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "base/executable_dir.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

namespace fs = std::filesystem;

namespace {

constexpr std::array kFiles{"index.html", "app.js", "app.css"};

bool complete(const fs::path& dir) {
  for (const char* name : kFiles) {
    struct stat st {};
    if (::stat((dir / name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  }
  return true;
}

std::string read_asset(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw Error(fmt::format("the viewer's {}: {}", path.string(), std::strerror(errno)));
  // A FIFO or a device named index.html would block or never end.
  if (!S_ISREG(st.st_mode))
    throw Error(fmt::format("the viewer's {} is not a regular file", path.string()));
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in && !in.eof())
    throw Error(
        fmt::format("reading the viewer's {} failed: {}", path.string(), std::strerror(errno)));
  return std::move(text).str();
}

}  // namespace

std::string find_viewer_dir() {
  if (const char* env = std::getenv("SONDE_VIEWER_DIR"); env && *env) {
    if (!complete(env))
      throw Error(
          fmt::format("SONDE_VIEWER_DIR={} does not hold the viewer (index.html, app.js, "
                      "app.css)",
                      env));
    return fs::absolute(env).lexically_normal().string();
  }
  fs::path prefix = executable_dir().parent_path();
  fs::path build = prefix / "viewer" / "dist";
  fs::path installed = prefix / "share" / "sonde" / "viewer";
  for (const fs::path& dir : {build, installed})
    if (complete(dir)) return dir.string();
  throw Error(
      fmt::format("the browser viewer is not built: no index.html, app.js and app.css in "
                  "{} or {} (build the `sonde_viewer` target, or set SONDE_VIEWER_DIR)",
                  build.string(), installed.string()));
}

ViewerAssets load_viewer_assets(const std::string& dir) {
  fs::path d(dir);
  return {dir, read_asset(d / "index.html"), read_asset(d / "app.js"), read_asset(d / "app.css")};
}

}  // namespace sonde::analyzers
