#include <cmath>
#include <string>
#include <unordered_map>

#include "export/export.hpp"
#include "export/export_samples.hpp"
#include "render/table_format.hpp"

namespace sonde::analyzers {

// A frame's name as one folded-stack frame: ';' would split it, control characters and bytes
// that are not UTF-8 would break the line (shown as escapes, see visible()), and an empty name
// would leave an empty frame.
std::string folded_frame(const std::string& name) {
  // Escapes that no name can spell: a backslash of the name's own is one too (a region
  // "a\x3bb" was the frame "a;b"), and so is the "<" of a name "<empty>".
  if (name.empty()) return "<empty>";
  if (name == "<empty>") return "\\x3cempty>";
  std::string own;
  for (char c : name) {
    if (c == '\\')
      own += "\\x5c";
    else
      own += c;
  }
  std::string out;
  for (char c : visible(own)) {
    if (c == ';')
      out += "\\x3b";
    else
      out += c;
  }
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> folded_stacks(const ProfileFile& file) {
  // One line per row of the callpaths view (a path of routines, merged over threads); two
  // routines of one display path stay two lines, which flame-graph tools add up themselves.
  // The path is rebuilt from path_ids: the view's own joins a ';' inside a name as a frame.
  std::unordered_map<std::string, std::string> frame;
  {
    auto st = file.prepare("SELECT CAST(routine_id AS TEXT), name FROM routines");
    while (st.step()) frame.emplace(st.text(0), folded_frame(st.text(1)));
  }
  std::vector<std::pair<std::string, std::int64_t>> out;
  auto st = file.prepare("SELECT path_ids, excl_s FROM callpaths ORDER BY path, path_ids");
  while (st.step()) {
    auto us = static_cast<std::int64_t>(std::llround(st.real(1) * 1e6));
    if (us <= 0) continue;
    std::string ids = st.text(0), path;
    for (std::size_t at = 0; at <= ids.size();) {
      std::size_t end = std::min(ids.find('/', at), ids.size());
      auto it = frame.find(ids.substr(at, end - at));
      path += (path.empty() ? "" : ";") + (it != frame.end() ? it->second : "<unknown>");
      at = end + 1;
    }
    out.emplace_back(std::move(path), us);
  }
  // The busy threads' time in no measured call, as a frame of its own beside the top-level
  // calls: left out, a flame graph's 100 % was only the measured part (47.678 s of 51.559 s
  // dropped from one run), where the report's is the threads' time.
  auto root = file.prepare("SELECT routine, excl_s FROM hotspots WHERE kind = 'root'");
  std::int64_t root_us = 0;
  std::string root_name;
  while (root.step()) {
    root_us += static_cast<std::int64_t>(std::llround(root.real(1) * 1e6));
    root_name = folded_frame(root.text(0));
  }
  if (root_us > 0) out.emplace_back(std::move(root_name), root_us);
  return out;
}

void write_folded(const ProfileFile& file, std::ostream& out) {
  for (const auto& [path, us] : folded_stacks(file)) out << path << ' ' << us << '\n';
}

}  // namespace sonde::analyzers
