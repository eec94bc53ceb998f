#include "base/executable_dir.hpp"

#include <fmt/format.h>

#include "base/error.hpp"

namespace sonde::analyzers {

std::filesystem::path executable_dir() {
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(fmt::format("cannot locate the sonde executable: {}", ec.message()));
  return self.parent_path();
}

}  // namespace sonde::analyzers
