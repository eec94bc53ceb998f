#include "render/ranks.hpp"

#include <fmt/format.h>

namespace sonde::analyzers {

std::string render_ranks_text(const RanksReport& report) {
  std::string out = fmt::format("{} rank{}", report.ranks, report.ranks == 1 ? "" : "s");
  // One rank's file of a larger run read as a whole run of one (a red-team run).
  if (report.world_size > report.ranks)
    out += report.merged
               ? fmt::format(" of the run's {} (the others are not in this merged file)",
                             report.world_size)
               : fmt::format(
                     " of the run's {} (the others are in files of their own: sonde merge "
                     "reads them as one)",
                     report.world_size);
  out += "\n";
  for (const std::string& note : report.notes) out += fmt::format("note: {}\n", note);
  for (const RanksSection& s : report.sections) {
    out += fmt::format("\n{}\n", s.title);
    out += s.table.rows.empty() ? "  (none recorded)\n" : render_text(s.table);
  }
  return out;
}

Json render_ranks_json(const std::string& path, const RanksReport& report) {
  Json j = {{"file", path},
            {"ranks", report.ranks},
            {"world_size", report.world_size},
            {"notes", report.notes}};
  for (const RanksSection& s : report.sections) j[s.id] = render_json(s.table);
  return j;
}

}  // namespace sonde::analyzers
