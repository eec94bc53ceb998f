#include <cmath>

#include "export/export.hpp"

namespace sonde::analyzers {

std::vector<std::pair<std::string, std::int64_t>> folded_stacks(const ProfileFile& file) {
  // One line per row of the callpaths view (a path of routines, merged over threads); two
  // routines of one display path stay two lines, which flame-graph tools add up themselves.
  std::vector<std::pair<std::string, std::int64_t>> out;
  auto st = file.prepare("SELECT path, excl_s FROM callpaths ORDER BY path, path_ids");
  while (st.step()) {
    auto us = static_cast<std::int64_t>(std::llround(st.real(1) * 1e6));
    if (us > 0) out.emplace_back(st.text(0), us);
  }
  return out;
}

void write_folded(const ProfileFile& file, std::ostream& out) {
  for (const auto& [path, us] : folded_stacks(file)) out << path << ' ' << us << '\n';
}

}  // namespace sonde::analyzers
