#include "profile/launcher_file.hpp"

namespace sonde::analyzers {

std::optional<std::string> launcher_file_note(const ProfileFile& file) {
  auto st = file.prepare(
      "SELECT message FROM notes WHERE topic = ?1 AND NOT EXISTS (SELECT 1 FROM processes "
      "WHERE rank IS NOT NULL) ORDER BY note_id LIMIT 1");
  st.bind(1, kRankFilesTopic);
  if (!st.step()) return std::nullopt;
  return st.text(0);
}

}  // namespace sonde::analyzers
