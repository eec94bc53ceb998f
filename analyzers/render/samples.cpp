#include "render/samples.hpp"

#include <fmt/format.h>

namespace sonde::analyzers {

namespace {

// The innermost `keep` frames of a ';'-joined path, "…;" in front of those left out: a Python
// path with its import machinery would push the native frames off a terminal.
std::string innermost(const std::string& path, int keep) {
  std::size_t cut = path.size();
  for (int i = 0; i < keep; ++i) {
    cut = path.rfind(';', cut == 0 ? 0 : cut - 1);
    if (cut == std::string::npos) return path;
  }
  return "…" + path.substr(cut);
}

bool has_samples(const ProfileFile& file) {
  Statement s(file, "SELECT 1 FROM sqlite_master WHERE name = 'sampled_callpaths'");
  return s.step();
}

}  // namespace

Table sampled_table(const ProfileFile& file, std::size_t top) {
  Table t;
  t.columns = {{"Samples", "samples", 0},
               {"Share %", "share_pct", 1},
               {"± %", "share_err_pct", 1},
               {"Under", "path", 0},
               {"Sampled native frames", "frames", 0}};
  if (!has_samples(file)) return t;
  Statement s(file,
              "SELECT path, frames, count, 100 * share, 100 * share_err FROM sampled_callpaths "
              "ORDER BY count DESC, path, frames");
  while (s.step() && (top == 0 || t.rows.size() < top)) {
    t.rows.push_back({Cell(s.int64(2)), Cell(s.real(3)), Cell(s.real(4)),
                      Cell(s.text(0).empty() ? std::string("<thread>") : s.text(0)),
                      Cell(s.text(1).empty() ? std::string("(own code)") : s.text(1))});
  }
  return t;
}

std::string render_samples_text(const ProfileFile& file, std::size_t top) {
  Table t = sampled_table(file, top);
  if (t.rows.empty()) return "";
  for (auto& row : t.rows) {
    row[3] = innermost(std::get<std::string>(row[3]), 3);
    row[4] = innermost(std::get<std::string>(row[4]), 4);
  }
  std::string hz;
  Statement s(file, "SELECT value FROM run_info WHERE key = 'sample.hz' LIMIT 1");
  if (s.step()) hz = s.text(0);
  return fmt::format(
      "\nSampled [sampled], not exact: CPU-time samples{}, apart from the figures "
      "above; share of all samples, ± one standard error\n{}",
      hz.empty() ? "" : fmt::format(" at {} Hz per thread", hz), render_text(t));
}

Json render_samples_json(const ProfileFile& file, std::size_t top) {
  return render_json(sampled_table(file, top));
}

}  // namespace sonde::analyzers
