// `sonde export --format folded`: one line per row of the `callpaths` view, in its order (path,
// then path_ids), from the nodes walked once in memory (export/callpath_walk.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>
#include <string>
#include <tuple>
#include <unordered_map>

#include "base/table_format.hpp"
#include "export/callpath_walk.hpp"
#include "export/export.hpp"
#include "export/export_samples.hpp"

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

namespace {

// The busy threads' time in no measured call, as a frame of its own beside the top-level
// calls: left out, a flame graph's 100 % was only the measured part (47.678 s of 51.559 s
// dropped from one run), where the report's is the threads' time.
std::string root_line(const ProfileFile& file) {
  auto root = file.prepare("SELECT routine, excl_s FROM hotspots WHERE kind = 'root'");
  std::int64_t root_us = 0;
  std::string root_name;
  while (root.step()) {
    root_us += static_cast<std::int64_t>(std::llround(root.real(1) * 1e6));
    root_name = folded_frame(root.text(0));
  }
  return root_us > 0 ? fmt::format("{} {}\n", root_name, root_us) : "";
}

}  // namespace

void write_folded(const ProfileFile& file, std::ostream& out) {
  // One line per row of the callpaths view (a path of routines, merged over threads); two
  // routines of one display path stay two lines, which flame-graph tools add up themselves.
  WalkRoutines routines = read_walk_routines(file);
  CallpathWalk walk(file, routines, true, routines.semicolon);
  std::string text;
  // Microseconds rounded on the running sum, each line the step it makes: rounded one by one, a
  // 1M-path file whose paths each took under half a microsecond lost 6.9 % of its time (those
  // lines were 0 and left out), where the lines must add up to the threads' time. A line is
  // then within a microsecond of its own excl_s.
  std::int64_t sum_ns = 0, written_us = 0;
  auto line = [&](std::string_view frames, std::int64_t excl_ns) -> bool {
    sum_ns += excl_ns;
    auto us =
        static_cast<std::int64_t>(std::llround(static_cast<double>(sum_ns) / 1e3)) - written_us;
    if (us <= 0) return false;
    written_us += us;
    text.assign(frames);
    text += ' ';
    fmt::format_to(std::back_inserter(text), "{}", us);
    text += '\n';
    return true;
  };
  if (!routines.semicolon) {
    std::string buffer;
    walk.run([&](const CallpathRow& row) {
      if (!line(row.frames, row.excl_ns)) return;
      buffer += text;
      if (buffer.size() >= (1u << 20)) {
        out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        buffer.clear();
      }
    });
    out << buffer << root_line(file);
    return;
  }
  // A ';' inside a name: "a;b" sorts between paths of other frames, so the lines are sorted
  // by the view's own keys (its path joins the names as they are), then rounded in that order.
  std::vector<std::tuple<std::string, std::string, std::string, std::int64_t>> rows;
  walk.run([&](const CallpathRow& row) {
    rows.emplace_back(std::string(row.names), walk.ids(row.path), std::string(row.frames),
                      row.excl_ns);
  });
  std::sort(rows.begin(), rows.end());
  for (const auto& r : rows)
    if (line(std::get<2>(r), std::get<3>(r))) out << text;
  out << root_line(file);
}

}  // namespace sonde::analyzers
