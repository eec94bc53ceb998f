#include "metrics/diff.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace sonde::analyzers {
namespace {

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

ProfileDiff compute_diff(const Metrics& before, const Metrics& after) {
  ProfileDiff d;
  d.total_before_ns = before.total_ns;
  d.total_after_ns = after.total_ns;
  if (after.total_ns > 0)
    d.total_speedup = static_cast<double>(before.total_ns) / static_cast<double>(after.total_ns);

  using Key = std::pair<std::string, std::string>;
  std::map<Key, DiffRow> rows;
  for (const auto& r : before.routines) {
    DiffRow& row = rows[{r.name, r.kind}];
    row.name = r.name;
    row.kind = r.kind;
    row.before_ns = r.incl_ns;
  }
  for (const auto& r : after.routines) {
    DiffRow& row = rows[{r.name, r.kind}];
    row.name = r.name;
    row.kind = r.kind;
    row.after_ns = r.incl_ns;
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
    return std::tie(a.name, a.kind) < std::tie(b.name, b.kind);
  };
  std::stable_sort(d.phases.begin(), d.phases.end(), by_time);
  std::stable_sort(d.routines.begin(), d.routines.end(), by_time);

  using ShapeKey = std::tuple<std::string, std::string, std::int64_t, std::int64_t, std::int64_t,
                              std::string>;
  std::map<ShapeKey, ShapeDiffRow> shapes;
  std::map<ShapeKey, std::int64_t> time_before;
  auto add = [&](const ShapeMetrics& s, bool is_before) {
    ShapeKey key{s.routine, s.call_site, s.m, s.n, s.k, s.dtype};
    ShapeDiffRow& row = shapes[key];
    row.routine = s.routine;
    row.call_site = s.call_site;
    row.dtype = s.dtype;
    row.m = s.m;
    row.n = s.n;
    row.k = s.k;
    double g = s.time_ns > 0 ? s.flops / static_cast<double>(s.time_ns) : 0.0;
    if (is_before) {
      row.gflops_before = g;
      time_before[key] = s.time_ns;
    } else {
      row.gflops_after = g;
    }
  };
  for (const auto& s : before.shapes) add(s, true);
  for (const auto& s : after.shapes) add(s, false);
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
               {"speedup", "speedup", 2},     {"status", "status", 0}};
  for (const auto& r : rows)
    t.rows.push_back({r.name, r.kind, opt_seconds(r.before_ns), opt_seconds(r.after_ns),
                      opt_cell(r.speedup), r.status});
  return t;
}

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
  std::string out = fmt::format("total: {:.3f} s -> {:.3f} s", d.total_before_ns / 1e9,
                                d.total_after_ns / 1e9);
  if (d.total_speedup) out += fmt::format(", speedup {:.2f}x", *d.total_speedup);
  out += " (sum of the threads' inclusive time)\n";
  if (!d.phases.empty()) out += "\nPhases (regions, Python functions), inclusive time:\n" + render_text(diff_table(d.phases));
  if (!d.routines.empty()) out += "\nRoutines, inclusive time:\n" + render_text(diff_table(d.routines));
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
              {"phases", render_json(diff_table(d.phases))},
              {"routines", render_json(diff_table(d.routines))},
              {"shapes", render_json(shape_diff_table(d.shapes))}};
}

}  // namespace sonde::analyzers
