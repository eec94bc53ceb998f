#include "programs/python_package.hpp"

#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

namespace sonde::analyzers {

namespace fs = std::filesystem;

std::string find_python_package(const std::string& library) {
  fs::path lib_dir = fs::path(library).parent_path();
  // The build tree (lib/ beside python/), `cmake --install` and the .deb (<libdir>/sonde/python,
  // python_hook/CMakeLists.txt), a wheel (the package holds lib/).
  std::vector<fs::path> candidates = {lib_dir / ".." / "python", lib_dir / "sonde" / "python",
                                      lib_dir / ".." / ".." / ".."};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(lib_dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("python3", 0) != 0) continue;
    candidates.push_back(entry.path() / "dist-packages");
    candidates.push_back(entry.path() / "site-packages");
  }
  for (const fs::path& c : candidates) {
    if (fs::is_regular_file(c / "sonde" / "autostart" / "sitecustomize.py", ec))
      return fs::weakly_canonical(c, ec).string();
  }
  return {};
}

std::string autostart_python_path(const std::string& package) {
  std::string path = package + "/sonde/autostart";
  if (const char* old = std::getenv("PYTHONPATH"); old != nullptr && *old != '\0')
    path += std::string(":") + old;
  return path;
}

}  // namespace sonde::analyzers
