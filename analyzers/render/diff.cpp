// sonde diff's tables, text and JSON. CSV and JSON carry every figure's spread and noise; the
// text shows them where there are several runs a side, and says noise is unknown where not.
#include "render/diff.hpp"

#include <fmt/format.h>

#include <cmath>
#include <set>

namespace sonde::analyzers {
namespace {

Cell opt_cell(const std::optional<double>& v) {
  if (v) return *v;
  return std::monostate{};
}

Cell opt_seconds(const std::optional<std::int64_t>& ns) {
  if (ns) return static_cast<double>(*ns) / 1e9;
  return std::monostate{};
}

// A side's min or max, in the unit shown (scale: 1e-9 for ns to s); none where it has no run.
Cell bound(const Spread& s, double value, double scale = 1) {
  if (s.runs == 0) return std::monostate{};
  return value * scale;
}

// A spread's bound in seconds, converted as the median is (opt_seconds): multiplied by 1e-9,
// a single run's min read 0.9480396900000001 against its median's 0.94803969.
Cell bound_s(const Spread& s, double ns) {
  if (s.runs == 0) return std::monostate{};
  return static_cast<double>(std::llround(ns)) / 1e9;
}

Cell noise_cell(const std::string& status, Noise noise) {
  if (status != "both") return std::monostate{};
  return noise_text(noise);
}

std::string range_text(const Spread& s, double scale, int precision) {
  if (s.runs == 0) return "-";
  return fmt::format("{:.{}f}-{:.{}f}", s.min * scale, precision, s.max * scale, precision);
}

bool several_runs(const ProfileDiff& d) { return d.runs_before > 1 || d.runs_after > 1; }

// The text table: the CSV/JSON columns named, in this order; ranges as one "min-max" column.
Table pick(const Table& full, const std::vector<std::string>& keys) {
  Table t;
  std::vector<std::size_t> index;
  for (const std::string& k : keys)
    for (std::size_t i = 0; i < full.columns.size(); ++i)
      if (full.columns[i].key == k) {
        t.columns.push_back(full.columns[i]);
        index.push_back(i);
      }
  for (const auto& row : full.rows) {
    std::vector<Cell> r;
    for (std::size_t i : index) r.push_back(row[i]);
    t.rows.push_back(std::move(r));
  }
  return t;
}

}  // namespace

Table diff_table(const std::vector<DiffRow>& rows) {
  Table t;
  t.columns = {{"name", "name", 0},
               {"kind", "kind", 0},
               {"before s", "before_s", 6},
               {"before min s", "before_min_s", 6},
               {"before max s", "before_max_s", 6},
               {"after s", "after_s", 6},
               {"after min s", "after_min_s", 6},
               {"after max s", "after_max_s", 6},
               {"speedup", "speedup", 2},
               {"noise", "noise", 0},
               {"status", "status", 0},
               {"library", "library", 0},
               {"file", "file", 0},
               {"line", "line", 0},
               {"runs before", "runs_before", 0},
               {"runs after", "runs_after", 0},
               {"before min-max s", "before_range", 0},
               {"after min-max s", "after_range", 0},
               {"before name", "before_name", 0}};
  for (const auto& r : rows)
    t.rows.push_back(
        {r.name, r.kind, opt_seconds(r.before_ns), bound_s(r.before, r.before.min),
         bound_s(r.before, r.before.max), opt_seconds(r.after_ns), bound_s(r.after, r.after.min),
         bound_s(r.after, r.after.max), opt_cell(r.speedup), noise_cell(r.status, r.noise),
         r.status, r.library, r.file, r.line, static_cast<std::int64_t>(r.before.runs),
         static_cast<std::int64_t>(r.after.runs), range_text(r.before, 1e-9, 6),
         range_text(r.after, 1e-9, 6), r.before_name.empty() ? Cell() : Cell(r.before_name)});
  return t;
}

namespace {
// The CSV and JSON rows: every column but the text's ranges (their min and max are columns).
Table diff_data_table(const std::vector<DiffRow>& rows) {
  return pick(diff_table(rows),
              {"name", "kind", "before_s", "before_min_s", "before_max_s", "after_s", "after_min_s",
               "after_max_s", "speedup", "noise", "status", "library", "file", "line",
               "runs_before", "runs_after", "before_name"});
}
}  // namespace

Table diff_csv_table(const ProfileDiff& d) {
  Table t;
  t.columns.push_back({"section", "section", 0});
  for (const auto& [section, rows] : {std::pair{"phase", &d.phases}, {"routine", &d.routines}}) {
    Table part = diff_data_table(*rows);
    if (t.columns.size() == 1)
      t.columns.insert(t.columns.end(), part.columns.begin(), part.columns.end());
    for (auto& row : part.rows) {
      row.insert(row.begin(), Cell(std::string(section)));
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

namespace {

// Text: where two routines share a name, the file (or library) follows it, as in the report.
std::string diff_text_table(const std::vector<DiffRow>& rows, bool spread) {
  std::set<std::pair<std::string, std::string>> seen, twice;
  for (const auto& r : rows)
    if (!seen.insert({r.name, r.kind}).second) twice.insert({r.name, r.kind});
  Table t =
      spread ? pick(diff_table(rows), {"name", "kind", "before_s", "before_range", "after_s",
                                       "after_range", "speedup", "noise", "status"})
             : pick(diff_table(rows), {"name", "kind", "before_s", "after_s", "speedup", "status"});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DiffRow& r = rows[i];
    if (twice.count({r.name, r.kind}) != 0)
      t.rows[i][0] = r.name + (!r.file.empty() ? fmt::format(" {}:{}", r.file, r.line)
                                               : fmt::format(" ({})", r.library));
    if (!r.before_name.empty())  // its line moved: where it was before
      t.rows[i][0] =
          fmt::format("{} (before: {})", std::get<std::string>(t.rows[i][0]), r.before_name);
  }
  return render_text(t);
}

std::string total_line(const std::string& what, const DiffTotal& t, bool spread) {
  if (!spread)
    return fmt::format("{:.3f} s -> {:.3f} s", t.before.median / 1e9, t.after.median / 1e9);
  std::string out = fmt::format("{:.3f} s ({}) -> {:.3f} s ({})", t.before.median / 1e9,
                                range_text(t.before, 1e-9, 3), t.after.median / 1e9,
                                range_text(t.after, 1e-9, 3));
  if (t.speedup) out += fmt::format(", {} {:.2f}x", what, *t.speedup);
  return out + ": " + noise_text(t.noise);
}

}  // namespace

Table shape_diff_table(const std::vector<ShapeDiffRow>& rows) {
  Table t;
  t.columns = {{"routine", "routine", 0},
               {"call_site", "call_site", 0},
               {"m", "m", 0},
               {"n", "n", 0},
               {"k", "k", 0},
               {"dtype", "dtype", 0},
               {"GFLOP/s before", "gflops_before", 3},
               {"before min", "gflops_before_min", 3},
               {"before max", "gflops_before_max", 3},
               {"GFLOP/s after", "gflops_after", 3},
               {"after min", "gflops_after_min", 3},
               {"after max", "gflops_after_max", 3},
               {"ratio", "ratio", 2},
               {"noise", "noise", 0},
               {"status", "status", 0},
               {"runs before", "runs_before", 0},
               {"runs after", "runs_after", 0},
               {"before min-max", "before_range", 0},
               {"after min-max", "after_range", 0},
               {"before call site", "before_call_site", 0}};
  for (const auto& r : rows)
    t.rows.push_back({r.routine,
                      r.call_site,
                      r.m,
                      r.n,
                      r.k,
                      r.dtype,
                      opt_cell(r.gflops_before),
                      bound(r.before, r.before.min),
                      bound(r.before, r.before.max),
                      opt_cell(r.gflops_after),
                      bound(r.after, r.after.min),
                      bound(r.after, r.after.max),
                      opt_cell(r.ratio),
                      noise_cell(r.status, r.noise),
                      r.status,
                      static_cast<std::int64_t>(r.before.runs),
                      static_cast<std::int64_t>(r.after.runs),
                      range_text(r.before, 1, 3),
                      range_text(r.after, 1, 3),
                      r.before_call_site.empty() ? Cell() : Cell(r.before_call_site)});
  return t;
}

namespace {
Table shape_data_table(const std::vector<ShapeDiffRow>& rows) {
  return pick(shape_diff_table(rows),
              {"routine", "call_site", "m", "n", "k", "dtype", "gflops_before", "gflops_before_min",
               "gflops_before_max", "gflops_after", "gflops_after_min", "gflops_after_max", "ratio",
               "noise", "status", "runs_before", "runs_after", "before_call_site"});
}
}  // namespace

std::string render_diff_text(const ProfileDiff& d) {
  std::string out;
  for (const std::string& w : d.warnings) out += "warning: " + visible(w) + "\n";
  bool spread = several_runs(d);
  if (spread) {
    out += fmt::format(
        "{} run{} before, {} run{} after: each figure is the median of its runs, "
        "with their min-max; within noise where the two ranges overlap; a phase or routine "
        "whose medians differ by {:.3f} s or less is under the floor (a quieter moment speeds "
        "every routine of a run at once)\n",
        d.runs_before, d.runs_before == 1 ? "" : "s", d.runs_after, d.runs_after == 1 ? "" : "s",
        d.row_floor_ns / 1e9);
    out += "total wall time: " + total_line("speedup", d.total, true) + "\n";
    out += "busy threads' time: " + total_line("speedup", d.threads, true) + "\n";
  } else {
    out += "total: " + total_line("", d.total, false) + " wall time";
    if (d.total_speedup) out += fmt::format(", speedup {:.2f}x", *d.total_speedup);
    out += " (busy threads' time " + total_line("", d.threads, false) + ")\n";
    out +=
        "noise: unknown with one run a side; run each side several times and give them all "
        "(sonde diff a1.db a2.db a3.db -- b1.db b2.db b3.db) to see which figures differ "
        "beyond it\n";
  }
  if (!d.phases.empty())
    out += "\nPhases (regions, Python functions), inclusive time:\n" +
           diff_text_table(d.phases, spread);
  if (!d.routines.empty())
    out += "\nRoutines, inclusive time:\n" + diff_text_table(d.routines, spread);
  if (!d.shapes.empty()) {
    Table shapes =
        spread ? pick(shape_diff_table(d.shapes),
                      {"routine", "call_site", "m", "n", "k", "dtype", "gflops_before",
                       "before_range", "gflops_after", "after_range", "ratio", "noise", "status"})
               : pick(shape_diff_table(d.shapes),
                      {"routine", "call_site", "m", "n", "k", "dtype", "gflops_before",
                       "gflops_after", "ratio", "status"});
    for (std::size_t i = 0; i < d.shapes.size(); ++i)
      if (!d.shapes[i].before_call_site.empty())  // its function's line moved
        shapes.rows[i][1] =
            fmt::format("{} (before: {})", d.shapes[i].call_site, d.shapes[i].before_call_site);
    out += "\nGEMM shapes:\n" + render_text(shapes);
  }
  return out;
}

Json render_diff_json(const std::vector<std::string>& before_paths,
                      const std::vector<std::string>& after_paths, const ProfileDiff& d) {
  Json j{{"before", before_paths.empty() ? Json() : Json(before_paths[0])},
         {"after", after_paths.empty() ? Json() : Json(after_paths[0])},
         {"before_files", before_paths},
         {"after_files", after_paths},
         {"runs_before", d.runs_before},
         {"runs_after", d.runs_after},
         {"total_before_s", d.total_before_ns / 1e9},
         {"total_after_s", d.total_after_ns / 1e9},
         {"total_speedup", d.total_speedup ? Json(*d.total_speedup) : Json(nullptr)},
         {"total_noise", noise_text(d.total.noise)},
         {"threads_before_s", d.threads_before_ns / 1e9},
         {"threads_after_s", d.threads_after_ns / 1e9},
         {"threads_speedup", d.threads.speedup ? Json(*d.threads.speedup) : Json(nullptr)},
         {"threads_noise", noise_text(d.threads.noise)},
         {"noise_min_effect", kNoiseMinEffect},
         {"noise_max_chance", kNoiseMaxChance},
         {"noise_row_floor_s", d.row_floor_ns / 1e9},
         {"warnings", d.warnings},
         {"phases", render_json(diff_data_table(d.phases))},
         {"routines", render_json(diff_data_table(d.routines))},
         {"shapes", render_json(shape_data_table(d.shapes))}};
  for (const auto& [t, name] : {std::pair{&d.total, "total"}, {&d.threads, "threads"}}) {
    for (const auto& [spread, side] : {std::pair{&t->before, "before"}, {&t->after, "after"}}) {
      std::string key = fmt::format("{}_{}", name, side);
      j[key + "_min_s"] = spread->runs ? Json(spread->min / 1e9) : Json();
      j[key + "_max_s"] = spread->runs ? Json(spread->max / 1e9) : Json();
    }
  }
  return j;
}

Json render_diff_json(const std::string& before_path, const std::string& after_path,
                      const ProfileDiff& d) {
  return render_diff_json(std::vector<std::string>{before_path},
                          std::vector<std::string>{after_path}, d);
}

}  // namespace sonde::analyzers
