#include "metrics/diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "profile/hotspots.hpp"

namespace sonde::analyzers {
namespace {

namespace fs = std::filesystem;

std::optional<double> ratio(double num, double den) {
  if (den <= 0) return std::nullopt;
  return num / den;
}

std::string status_of(bool before, bool after) {
  return before && after ? "both" : before ? "only before" : "only after";
}

Cell opt_cell(const std::optional<double>& v) {
  if (v) return *v;
  return std::monostate{};
}

Cell opt_seconds(const std::optional<std::int64_t>& ns) {
  if (ns) return static_cast<double>(*ns) / 1e9;
  return std::monostate{};
}

}  // namespace

namespace {

struct Totals {
  std::int64_t wall_ns = 0, thread_ns = 0;
};

Totals read_totals(const ProfileFile& file) {
  Totals t;
  auto st = file.prepare("SELECT wall_s, thread_s FROM run_totals");
  if (st.step()) {
    if (!st.is_null(0)) t.wall_ns = std::llround(st.real(0) * 1e9);
    t.thread_ns = std::llround(st.real(1) * 1e9);
  }
  return t;
}

}  // namespace

ProfileDiff compute_diff(const ProfileFile& before, const ProfileFile& after) {
  ProfileDiff d;
  Totals tb = read_totals(before), ta = read_totals(after);
  d.total_before_ns = tb.wall_ns;
  d.total_after_ns = ta.wall_ns;
  d.threads_before_ns = tb.thread_ns;
  d.threads_after_ns = ta.thread_ns;
  if (ta.wall_ns > 0)
    d.total_speedup = static_cast<double>(tb.wall_ns) / static_cast<double>(ta.wall_ns);

  // Routine ids are the file's own: across two files a routine is its identity.
  using Key = std::tuple<std::string, std::string, std::string, std::int64_t, std::string>;
  std::map<Key, DiffRow> rows;
  auto add_rows = [&](const ProfileFile& file, bool is_before) {
    for (const HotspotRow& r : compute_hotspots(file, ReportSort::kInclusive).rows) {
      if (r.kind == "root") continue;  // the threads' time is the total, above
      DiffRow& row = rows[{r.kind, r.library, r.file, r.line, r.name}];
      row.name = r.name;
      row.kind = r.kind;
      row.library = r.library;
      row.file = r.file;
      row.line = r.line;
      (is_before ? row.before_ns : row.after_ns) = r.incl_ns;
    }
  };
  add_rows(before, true);
  add_rows(after, false);
  // A Python function's file is its absolute path: the same script in two checkouts (or
  // machines) matched nothing. A routine found on one side only is paired with one found on
  // the other only with the same file base name, line, name, kind and library, where that pair
  // is the only one.
  using Loose = std::tuple<std::string, std::string, std::string, std::int64_t, std::string>;
  std::map<Loose, std::pair<std::vector<Key>, std::vector<Key>>> lone;
  for (const auto& [key, row] : rows) {
    if (row.before_ns.has_value() == row.after_ns.has_value()) continue;
    Loose loose{row.kind, row.library, fs::path(row.file).filename().string(), row.line, row.name};
    (row.before_ns ? lone[loose].first : lone[loose].second).push_back(key);
  }
  for (const auto& [loose, sides] : lone) {
    if (sides.first.size() != 1 || sides.second.size() != 1) continue;
    DiffRow& kept = rows[sides.first[0]];
    kept.after_ns = rows[sides.second[0]].after_ns;
    rows.erase(sides.second[0]);
  }
  for (auto& [key, row] : rows) {
    row.status = status_of(row.before_ns.has_value(), row.after_ns.has_value());
    if (row.before_ns && row.after_ns && *row.after_ns > 0)
      row.speedup = static_cast<double>(*row.before_ns) / static_cast<double>(*row.after_ns);
    (row.kind == "region" || row.kind == "python" ? d.phases : d.routines).push_back(row);
  }
  auto by_time = [](const DiffRow& a, const DiffRow& b) {
    auto ka = std::make_tuple(a.before_ns.value_or(-1), a.after_ns.value_or(-1));
    auto kb = std::make_tuple(b.before_ns.value_or(-1), b.after_ns.value_or(-1));
    if (ka != kb) return ka > kb;
    return std::tie(a.name, a.kind, a.file, a.library, a.line) <
           std::tie(b.name, b.kind, b.file, b.library, b.line);
  };
  std::stable_sort(d.phases.begin(), d.phases.end(), by_time);
  std::stable_sort(d.routines.begin(), d.routines.end(), by_time);

  // A routine across two files is its name and library (ids are each file's own).
  using ShapeKey = std::tuple<std::string, std::string, std::string, std::int64_t, std::int64_t,
                              std::int64_t, std::string>;
  std::map<ShapeKey, ShapeDiffRow> shapes;
  std::map<ShapeKey, std::int64_t> time_before;
  auto add = [&](const ProfileFile& file, bool is_before) {
    auto st = file.prepare(
        "SELECT routine, call_site, m, n, k, dtype, time_s, gflops, library FROM gemm_shapes");
    while (st.step()) {
      ShapeKey key{st.text(0), st.text(8), st.text(1), st.int64(2),
                   st.int64(3), st.int64(4), st.text(5)};
      ShapeDiffRow& row = shapes[key];
      std::tie(row.routine, std::ignore, row.call_site, row.m, row.n, row.k, row.dtype) = key;
      double g = st.is_null(7) ? 0.0 : st.real(7);
      if (is_before) {
        row.gflops_before = g;
        time_before[key] = std::llround(st.real(6) * 1e9);
      } else {
        row.gflops_after = g;
      }
    }
  };
  add(before, true);
  add(after, false);
  std::vector<std::pair<std::int64_t, ShapeDiffRow>> order;
  for (auto& [key, row] : shapes) {
    row.status = status_of(row.gflops_before.has_value(), row.gflops_after.has_value());
    if (row.gflops_before && row.gflops_after) row.ratio = ratio(*row.gflops_after, *row.gflops_before);
    auto it = time_before.find(key);
    order.emplace_back(it == time_before.end() ? -1 : it->second, row);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [t, row] : order) d.shapes.push_back(std::move(row));
  return d;
}

Table diff_table(const std::vector<DiffRow>& rows) {
  Table t;
  t.columns = {{"name", "name", 0},           {"kind", "kind", 0},
               {"before s", "before_s", 6},   {"after s", "after_s", 6},
               {"speedup", "speedup", 2},     {"status", "status", 0},
               {"library", "library", 0},     {"file", "file", 0},
               {"line", "line", 0}};
  for (const auto& r : rows)
    t.rows.push_back({r.name, r.kind, opt_seconds(r.before_ns), opt_seconds(r.after_ns),
                      opt_cell(r.speedup), r.status, r.library, r.file, r.line});
  return t;
}

Table diff_csv_table(const ProfileDiff& d) {
  Table t;
  t.columns.push_back({"section", "section", 0});
  for (const auto& [section, rows] : {std::pair{"phase", &d.phases}, {"routine", &d.routines}}) {
    Table part = diff_table(*rows);
    if (t.columns.size() == 1) t.columns.insert(t.columns.end(), part.columns.begin(), part.columns.end());
    for (auto& row : part.rows) {
      row.insert(row.begin(), Cell(std::string(section)));
      t.rows.push_back(std::move(row));
    }
  }
  return t;
}

namespace {

// Text: where two routines share a name, the file (or library) follows it, as in the report.
std::string diff_text_table(const std::vector<DiffRow>& rows) {
  std::set<std::pair<std::string, std::string>> seen, twice;
  for (const auto& r : rows)
    if (!seen.insert({r.name, r.kind}).second) twice.insert({r.name, r.kind});
  Table t = diff_table(rows);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const DiffRow& r = rows[i];
    if (twice.count({r.name, r.kind}) != 0)
      t.rows[i][0] = r.name + (!r.file.empty() ? fmt::format(" {}:{}", r.file, r.line)
                                               : fmt::format(" ({})", r.library));
    t.rows[i].resize(6);
  }
  t.columns.resize(6);
  return render_text(t);
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
               {"GFLOP/s after", "gflops_after", 3},
               {"ratio", "ratio", 2},
               {"status", "status", 0}};
  for (const auto& r : rows)
    t.rows.push_back({r.routine, r.call_site, r.m, r.n, r.k, r.dtype, opt_cell(r.gflops_before),
                      opt_cell(r.gflops_after), opt_cell(r.ratio), r.status});
  return t;
}

std::string render_diff_text(const ProfileDiff& d) {
  std::string out = fmt::format("total: {:.3f} s -> {:.3f} s wall time", d.total_before_ns / 1e9,
                                d.total_after_ns / 1e9);
  if (d.total_speedup) out += fmt::format(", speedup {:.2f}x", *d.total_speedup);
  out += fmt::format(" (busy threads' time {:.3f} s -> {:.3f} s)\n", d.threads_before_ns / 1e9,
                     d.threads_after_ns / 1e9);
  if (!d.phases.empty())
    out += "\nPhases (regions, Python functions), inclusive time:\n" + diff_text_table(d.phases);
  if (!d.routines.empty())
    out += "\nRoutines, inclusive time:\n" + diff_text_table(d.routines);
  if (!d.shapes.empty()) out += "\nGEMM shapes:\n" + render_text(shape_diff_table(d.shapes));
  return out;
}

Json render_diff_json(const std::string& before_path, const std::string& after_path,
                      const ProfileDiff& d) {
  return Json{{"before", before_path},
              {"after", after_path},
              {"total_before_s", d.total_before_ns / 1e9},
              {"total_after_s", d.total_after_ns / 1e9},
              {"total_speedup", d.total_speedup ? Json(*d.total_speedup) : Json(nullptr)},
              {"threads_before_s", d.threads_before_ns / 1e9},
              {"threads_after_s", d.threads_after_ns / 1e9},
              {"phases", render_json(diff_table(d.phases))},
              {"routines", render_json(diff_table(d.routines))},
              {"shapes", render_json(shape_diff_table(d.shapes))}};
}

}  // namespace sonde::analyzers
