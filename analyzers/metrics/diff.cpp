// sonde diff's figures: each side's runs read through the views, matched routine by routine,
// with the spread of every figure and the noise rule's word on it.
#include "metrics/diff.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "metrics/breakdown_roles.hpp"
#include "profile/hotspots.hpp"
#include "profile/line_costs.hpp"
#include "profile/run_summary.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

namespace fs = std::filesystem;
using Files = std::vector<const ProfileFile*>;

std::string status_of(bool before, bool after) {
  return before && after ? "both" : before ? "only before" : "only after";
}

// The rule's word, where both sides have a spread: one run has none, and its noise is unknown.
Noise noise_of(const std::vector<double>& before, const std::vector<double>& after,
               double floor = 0) {
  if (before.size() < 2 || after.size() < 2) return Noise::kUnknown;
  return judge_noise(before, after, floor);
}

std::optional<double> ratio_of(double num, double den) {
  if (den <= 0) return std::nullopt;
  return num / den;
}

DiffTotal total_of(const std::vector<double>& before, const std::vector<double>& after) {
  DiffTotal t;
  t.before = spread_of(before);
  t.after = spread_of(after);
  t.speedup = ratio_of(t.before.median, t.after.median);
  t.noise = noise_of(before, after);
  return t;
}

// A routine across files is its identity (routine ids are each file's own).
using Key = std::tuple<std::string, std::string, std::string, std::int64_t, std::string>;

struct RowRuns {
  DiffRow row;
  std::vector<double> before, after;  // inclusive ns, one per run it is in
};

void add_routines(std::map<Key, RowRuns>& rows, const ProfileFile& file, bool is_before) {
  std::map<Key, std::int64_t> mine;  // one value per routine and run
  for (const HotspotRow& r : compute_hotspots(file, ReportSort::kInclusive).rows) {
    if (r.kind == kinds::kRoot) continue;  // the threads' time is the total, above
    Key key{r.kind, r.library, r.file, r.line, r.name};
    mine[key] = r.incl_ns;
    DiffRow& row = rows[key].row;
    row.name = r.name;
    row.kind = r.kind;
    row.library = r.library;
    row.file = r.file;
    row.line = r.line;
  }
  for (const auto& [key, ns] : mine)
    (is_before ? rows[key].before : rows[key].after).push_back(static_cast<double>(ns));
}

// A Python function's file is its absolute path: the same script in two checkouts (or
// machines) matched nothing. A routine found on one side only is paired with one found on the
// other only with the same file base name, line, name, kind and library, where that pair is
// the only one.
//
// Then a Python function whose line moved (the daily loop: profile, edit the file, profile
// again; lines added above a def move it): one found on one side only is paired with one of
// the same kind, library, file base name and function found on the other only, where that
// pair is the only one. Until 2026-12-06 every function below an edit read "only before" and
// "only after", the ones just made faster among them, and train.py:30 was get_batch before
// and normalize_rows after. The row is named as after the edit, with its name before beside it.
// Only in the program's own files (installed packages and the standard library are not
// edited between two runs), and only where no function of the file found at the same line on
// both sides lies below the pair's line before: an edit that moved the def moved every def
// after it. Two methods of one name in two classes are two functions: a loader without
// workers before and with them after was paired as one (dataloader.py's _next_data of the
// single-process iterator, line 669, with the multi-process one's, 1286: "both", 1.01x, a
// red-team diff), and so would a model's Attention.forward with the FastAttention.forward
// that replaced it in an unchanged file.
void pair_lone_routines(std::map<Key, RowRuns>& rows) {
  auto pair_by = [&rows](auto&& loose_key, bool moved) {
    std::map<Key, std::pair<std::vector<Key>, std::vector<Key>>> lone;
    // Per file of the program's own, the lines of Python functions found there on both sides
    // (by the whole path: another package's utils.py or __init__.py is another file).
    std::map<std::string, std::vector<std::int64_t>> steady;
    for (const auto& [key, r] : rows) {
      if (r.before.empty() == r.after.empty()) {
        if (moved && r.row.kind == kinds::kPython && user_file(r.row.file))
          steady[r.row.file].push_back(r.row.line);
        continue;
      }
      if (std::optional<Key> loose = loose_key(r.row))
        (!r.before.empty() ? lone[*loose].first : lone[*loose].second).push_back(key);
    }
    for (const auto& [loose, sides] : lone) {
      if (sides.first.size() != 1 || sides.second.size() != 1) continue;
      if (moved) {
        const DiffRow& was = rows[sides.first[0]].row;
        const auto& lines = steady[was.file];
        if (std::any_of(lines.begin(), lines.end(),
                        [&](std::int64_t line) { return line > was.line; }))
          continue;
      }
      RowRuns& kept = rows[sides.first[0]];
      RowRuns& after = rows[sides.second[0]];
      kept.after = after.after;
      if (moved) {
        kept.row.before_name = kept.row.name;
        kept.row.name = after.row.name;
        kept.row.file = after.row.file;
        kept.row.line = after.row.line;
      }
      rows.erase(sides.second[0]);
    }
  };
  pair_by(
      [](const DiffRow& r) -> std::optional<Key> {
        return Key{r.kind, r.library, fs::path(r.file).filename().string(), r.line, r.name};
      },
      false);
  pair_by(
      [](const DiffRow& r) -> std::optional<Key> {
        if (r.kind != kinds::kPython || r.line <= 0 || !user_file(r.file)) return std::nullopt;
        return Key{r.kind, r.library, fs::path(r.file).filename().string(), 0,
                   function_part(r.name)};
      },
      true);
}

void finish_row(RowRuns& r, std::int64_t floor_ns) {
  DiffRow& row = r.row;
  row.before = spread_of(r.before);
  row.after = spread_of(r.after);
  if (!r.before.empty()) row.before_ns = std::llround(row.before.median);
  if (!r.after.empty()) row.after_ns = std::llround(row.after.median);
  row.status = status_of(row.before_ns.has_value(), row.after_ns.has_value());
  if (row.before_ns && row.after_ns && *row.after_ns > 0)
    row.speedup = row.before.median / row.after.median;
  if (row.status == "both") row.noise = noise_of(r.before, r.after, static_cast<double>(floor_ns));
}

// A GEMM shape across files is its routine's name and library, call site, m, n, k and dtype.
using ShapeKey = std::tuple<std::string, std::string, std::string, std::int64_t, std::int64_t,
                            std::int64_t, std::string>;

struct ShapeRuns {
  ShapeDiffRow row;
  std::vector<double> before, after, time_before;
};

// A call site before the edit is named as after it where its function's line moved (the phase
// rows' pairing): after a comment added at the top, every shape of the program's own code read
// "only before" and "only after", no ratio (a red-team diff).
void add_shapes(std::map<ShapeKey, ShapeRuns>& shapes, const ProfileFile& file, bool is_before,
                const std::map<std::string, std::string>& moved) {
  auto st = file.prepare(
      "SELECT routine, call_site, m, n, k, dtype, time_s, gflops, library FROM gemm_shapes");
  while (st.step()) {
    std::string site = st.text(1), before_site;
    if (auto m = moved.find(site); is_before && m != moved.end()) {
      before_site = site;
      site = m->second;
    }
    ShapeKey key{st.text(0), st.text(8), site, st.int64(2), st.int64(3), st.int64(4), st.text(5)};
    ShapeRuns& s = shapes[key];
    std::tie(s.row.routine, std::ignore, s.row.call_site, s.row.m, s.row.n, s.row.k, s.row.dtype) =
        key;
    if (!before_site.empty()) s.row.before_call_site = before_site;
    double g = st.is_null(7) ? 0.0 : st.real(7);
    (is_before ? s.before : s.after).push_back(g);
    if (is_before) s.time_before.push_back(st.real(6));
  }
}

// The distinct values of one fact on each side, for a warning: "before: 1; after: 2".
std::string sides_text(const std::vector<std::string>& before,
                       const std::vector<std::string>& after) {
  auto distinct = [](const std::vector<std::string>& v) {
    std::vector<std::string> out;
    for (const std::string& x : v)
      if (std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
    return fmt::format("{}", fmt::join(out, " | "));
  };
  return fmt::format("before: {}; after: {}", distinct(before), distinct(after));
}

bool all_same(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::set<std::string> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  return all.size() <= 1;
}

std::string threads_text(const RunSummary& s) {
  std::string out = "BLAS " + s.blas_threads.value_or("?");
  if (s.torch_threads) out += ", torch " + *s.torch_threads;
  return out;
}

// Runs that measured different windows or different work compare nothing like for like: a
// `--delay 25` run against a whole one read "2.81x speedup".
std::vector<std::string> comparability_warnings(const Files& before, const Files& after) {
  std::vector<std::string> window[2], command[2], options[2], threads[2], empty;
  for (int side = 0; side < 2; ++side)
    for (const ProfileFile* f : side == 0 ? before : after) {
      RunSummary s = load_run_summary(*f);
      // A run killed before its first flush: "0.012 s -> 0.000 s" and "the commands differ
      // (after: )" were all a red team's diff said of it.
      if (s.processes == 0) empty.push_back(f->path());
      window[side].push_back(s.window);
      command[side].push_back(program_command(s.command));
      std::string measuring = measuring_options(s);
      options[side].push_back(measuring.empty() ? "none" : measuring);
      threads[side].push_back(threads_text(s));
    }
  std::vector<std::string> out;
  for (const std::string& path : empty)
    out.push_back(fmt::format(
        "{} holds no process: no process of its run wrote to it (killed before its first "
        "flush, or still starting), and its figures are all 0",
        path));
  if (!all_same(window[0], window[1]))
    out.push_back(
        fmt::format("the collection windows differ ({}): the times are of different "
                    "parts of the runs, and no speedup between them means anything",
                    sides_text(window[0], window[1])));
  if (!all_same(command[0], command[1]))
    out.push_back(fmt::format("the commands differ ({}): the runs may do different work",
                              sides_text(command[0], command[1])));
  if (!all_same(options[0], options[1]))
    out.push_back(fmt::format(
        "the runs were measured differently ({}): Python frames, timed lines, traced calls, "
        "samples and recorded shapes add their cost to the times, and --paused records only "
        "what the program's sonde.start() and stop() enclose",
        sides_text(options[0], options[1])));
  if (!all_same(threads[0], threads[1]))
    out.push_back(fmt::format("the thread counts differ ({}): a speedup includes theirs",
                              sides_text(threads[0], threads[1])));
  return out;
}

}  // namespace

ProfileDiff compute_diff(const Files& before, const Files& after) {
  ProfileDiff d;
  d.runs_before = before.size();
  d.runs_after = after.size();
  d.warnings = comparability_warnings(before, after);

  std::vector<double> wall[2], busy[2];
  for (int side = 0; side < 2; ++side)
    for (const ProfileFile* f : side == 0 ? before : after) {
      auto st = f->prepare("SELECT wall_s, thread_s FROM run_totals");
      if (!st.step()) continue;
      wall[side].push_back(st.is_null(0) ? 0.0
                                         : static_cast<double>(std::llround(st.real(0) * 1e9)));
      busy[side].push_back(static_cast<double>(std::llround(st.real(1) * 1e9)));
    }
  d.total = total_of(wall[0], wall[1]);
  d.threads = total_of(busy[0], busy[1]);
  d.total_before_ns = std::llround(d.total.before.median);
  d.total_after_ns = std::llround(d.total.after.median);
  d.threads_before_ns = std::llround(d.threads.before.median);
  d.threads_after_ns = std::llround(d.threads.after.median);
  d.total_speedup = d.total.speedup;
  d.row_floor_ns = std::max<std::int64_t>(
      kDiffRowFloorNs,
      std::llround(kDiffRowFloorShare *
                   static_cast<double>(std::max(d.threads_before_ns, d.threads_after_ns))));

  std::map<Key, RowRuns> rows;
  for (const ProfileFile* f : before) add_routines(rows, *f, true);
  for (const ProfileFile* f : after) add_routines(rows, *f, false);
  pair_lone_routines(rows);
  std::map<std::string, std::string> moved;  // a moved function's name before -> after
  for (auto& [key, r] : rows) {
    if (!r.row.before_name.empty()) moved[r.row.before_name] = r.row.name;
    finish_row(r, d.row_floor_ns);
    (r.row.kind == kinds::kRegion || r.row.kind == kinds::kPython ? d.phases : d.routines)
        .push_back(r.row);
  }
  // Largest first by the larger of its two times: a routine found after only (the code a
  // change added) ranks by its own time; by the time before, a new function of 22 % of the run
  // came after rows of 0.000000 s (a red-team find).
  auto by_time = [](const DiffRow& a, const DiffRow& b) {
    auto larger = [](const DiffRow& r) {
      return std::max(r.before_ns.value_or(-1), r.after_ns.value_or(-1));
    };
    auto ka = std::make_tuple(larger(a), a.before_ns.value_or(-1), a.after_ns.value_or(-1));
    auto kb = std::make_tuple(larger(b), b.before_ns.value_or(-1), b.after_ns.value_or(-1));
    if (ka != kb) return ka > kb;
    return std::tie(a.name, a.kind, a.file, a.library, a.line) <
           std::tie(b.name, b.kind, b.file, b.library, b.line);
  };
  std::stable_sort(d.phases.begin(), d.phases.end(), by_time);
  std::stable_sort(d.routines.begin(), d.routines.end(), by_time);

  std::map<ShapeKey, ShapeRuns> shapes;
  for (const ProfileFile* f : before) add_shapes(shapes, *f, true, moved);
  for (const ProfileFile* f : after) add_shapes(shapes, *f, false, moved);
  std::vector<std::pair<double, ShapeDiffRow>> order;
  for (auto& [key, s] : shapes) {
    ShapeDiffRow& row = s.row;
    row.before = spread_of(s.before);
    row.after = spread_of(s.after);
    if (!s.before.empty()) row.gflops_before = row.before.median;
    if (!s.after.empty()) row.gflops_after = row.after.median;
    row.status = status_of(row.gflops_before.has_value(), row.gflops_after.has_value());
    if (row.gflops_before && row.gflops_after) {
      row.ratio = ratio_of(*row.gflops_after, *row.gflops_before);
      row.noise = noise_of(s.before, s.after);
    }
    order.emplace_back(s.time_before.empty() ? -1.0 : spread_of(s.time_before).median, row);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (auto& [t, row] : order) d.shapes.push_back(std::move(row));
  return d;
}

ProfileDiff compute_diff(const ProfileFile& before, const ProfileFile& after) {
  return compute_diff(Files{&before}, Files{&after});
}

}  // namespace sonde::analyzers
