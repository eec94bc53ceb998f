// `sonde export --format csv`: the `callpaths` view's rows as CSV, walked from the nodes in
// memory (export/callpath_walk.hpp) and written as they come. Read from the view and held whole,
// the benchmark's 1M-node file ran out of memory after 65 s (6.6 GB).
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "base/table_format.hpp"
#include "export/callpath_walk.hpp"
#include "export/export.hpp"

namespace sonde::analyzers {

void write_callpaths_csv(const ProfileFile& file, std::ostream& out) {
  WalkRoutines routines = read_walk_routines(file);
  CallpathWalk walk(file, routines, false, true);
  // Whether a name needs csv_escape()'s quotes: a path does where one of its names does (its
  // ';'s need none). Looked for per routine, not in every path's text (3.4 GB here).
  std::vector<bool> quoted(routines.name.size());
  for (std::size_t r = 0; r < quoted.size(); ++r)
    quoted[r] = routines.name[r].find_first_of(",\"\n\r") != std::string::npos;
  // The cells as `sonde query` writes the view's (render_csv): incl_s and excl_s are the
  // view's SUM(...) / 1e9 doubles.
  std::string text, ids;
  std::vector<std::uint32_t> chain;
  auto line = [&](const CallpathRow& row) {
    chain.clear();
    for (std::uint32_t p = row.path; p != CallpathWalk::kNone; p = walk.parent(p))
      chain.push_back(walk.routine(p));
    ids.clear();
    bool quote = false;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      if (!ids.empty()) ids += '/';
      ids += routines.id_text[*it];
      quote = quote || quoted[*it];
    }
    if (quote)
      text = csv_escape(row.names);
    else
      text.assign(row.names);
    fmt::format_to(std::back_inserter(text), ",{},{},{},{}\n", row.calls,
                   static_cast<double>(row.incl_ns) / 1e9, static_cast<double>(row.excl_ns) / 1e9,
                   ids);
  };
  out << "path,calls,incl_s,excl_s,path_ids\n";
  if (!routines.semicolon) {
    std::string buffer;
    walk.run([&](const CallpathRow& row) {
      line(row);
      buffer += text;
      if (buffer.size() >= (1u << 20)) {
        out.write(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        buffer.clear();
      }
    });
    out << buffer;
    return;
  }
  // A ';' inside a name: sorted by the view's own keys, as write_folded() does.
  std::vector<std::tuple<std::string, std::string, std::string>> lines;  // path, path_ids, line
  walk.run([&](const CallpathRow& row) {
    line(row);
    lines.emplace_back(std::string(row.names), ids, text);
  });
  std::sort(lines.begin(), lines.end());
  for (const auto& l : lines) out << std::get<2>(l);
}

}  // namespace sonde::analyzers
