#include "render/line_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <map>
#include <tuple>
#include <unordered_map>

namespace sonde::analyzers {

Table line_costs_table(const LineCosts& costs) {
  Table t;
  t.columns = {{"Function", "function", 0},
               {"File", "file", 0},
               {"Line", "line", 0},
               {"Hits", "hits", 0},
               {"Time s", "time_s", 6},
               {"% Time", "pct", 1},
               {"Line Contents", "contents", 0}};
  for (const auto& f : costs.functions)
    for (const auto& r : f.lines)
      if (r.recorded)
        t.rows.push_back({f.function, f.file, r.line, r.hits, static_cast<double>(r.time_ns) / 1e9,
                          r.pct, r.contents});
  return t;
}

std::string render_line_report_text(const LineCosts& costs) {
  // Not render_text: lines without hits have blank numbers here, as in line_profiler.
  static const char* kTitles[] = {"Line", "Hits", "Time (ms)", "Per Hit (us)", "% Time"};
  std::string out;
  for (const auto& f : costs.functions) {
    if (!out.empty()) out += "\n";
    out += fmt::format("Function: {} at {}:{}  Total time: {:.3f} s\n\n", visible(f.function),
                       visible(f.file.empty() ? f.name : f.file), f.first_line,
                       static_cast<double>(f.total_ns) / 1e9);
    if (!f.source_shown)
      out += "(source not shown: the file is gone, or is not the one profiled)\n\n";
    std::vector<std::array<std::string, 5>> cells;
    std::array<std::size_t, 5> width{};
    for (int c = 0; c < 5; ++c) width[c] = std::string_view(kTitles[c]).size();
    for (const auto& r : f.lines) {
      std::array<std::string, 5> row{fmt::format("{}", r.line)};
      if (r.recorded) {
        row[1] = fmt::format("{}", r.hits);
        row[2] = fmt::format("{:.3f}", static_cast<double>(r.time_ns) / 1e6);
        row[3] = fmt::format("{:.1f}", r.us_per_hit);
        row[4] = fmt::format("{:.1f}", r.pct);
      }
      for (int c = 0; c < 5; ++c) width[c] = std::max(width[c], row[c].size());
      cells.push_back(std::move(row));
    }
    auto numbers = [&](const auto& fields) {
      std::string s;
      for (int c = 0; c < 5; ++c) s += fmt::format("{}{:>{}}", c ? "  " : "", fields[c], width[c]);
      return s;
    };
    std::string header = numbers(kTitles) + "  Line Contents";
    out += header + "\n" + std::string(header.size(), '=') + "\n";
    for (std::size_t i = 0; i < cells.size(); ++i) {
      std::string line = numbers(cells[i]) + "  " + f.lines[i].contents;
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
  }
  return out;
}

Json render_line_report_json(const std::string& path, const LineCosts& costs) {
  auto functions = Json::array();
  for (const auto& f : costs.functions)
    functions.push_back(Json{{"function", f.function},
                             {"name", f.name},
                             {"file", f.file},
                             {"line", f.first_line},
                             {"total_s", static_cast<double>(f.total_ns) / 1e9}});
  return Json{{"file", path},
              {"functions", std::move(functions)},
              {"rows", render_json(line_costs_table(costs))}};
}

}  // namespace sonde::analyzers
