#include "render/ranks.hpp"

#include <fmt/format.h>

namespace sonde::analyzers {

std::string render_ranks_text(const RanksReport& report) {
  std::string out = fmt::format("{} rank{}\n", report.ranks, report.ranks == 1 ? "" : "s");
  for (const RanksSection& s : report.sections) {
    out += fmt::format("\n{}\n", s.title);
    out += s.table.rows.empty() ? "  (none recorded)\n" : render_text(s.table);
  }
  return out;
}

Json render_ranks_json(const std::string& path, const RanksReport& report) {
  Json j = {{"file", path}, {"ranks", report.ranks}};
  for (const RanksSection& s : report.sections) j[s.id] = render_json(s.table);
  return j;
}

}  // namespace sonde::analyzers
