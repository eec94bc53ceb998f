// `sonde diff A B`: time per phase and per routine before (A) and after (B) with the speedup,
// like a tuning-stage table, and GEMM GFLOP/s per shape before and after.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "profile/profile_file.hpp"
#include "render/table_format.hpp"

namespace sonde::analyzers {

// One routine, matched between the files by its identity (kind, library, file, line, name):
// two routines of one display name are two rows.
struct DiffRow {
  std::string name;
  std::string kind;
  std::string library;
  std::string file;
  std::int64_t line = 0;
  std::optional<std::int64_t> before_ns, after_ns;  // inclusive; nullopt: not in that file
  std::optional<double> speedup;                    // before / after, both present and after > 0
  std::string status;  // "both", "only before", "only after"
};

struct ShapeDiffRow {
  std::string routine, call_site, dtype;
  std::int64_t m = 0, n = 0, k = 0;
  std::optional<double> gflops_before, gflops_after;
  std::optional<double> ratio;  // after / before: > 1 is faster
  std::string status;
};

struct ProfileDiff {
  std::int64_t total_before_ns = 0, total_after_ns = 0;  // wall time: the run's total
  std::optional<double> total_speedup;                   // wall time before / after
  std::int64_t threads_before_ns = 0, threads_after_ns = 0;  // the busy threads' time
  std::vector<DiffRow> phases;    // regions and Python functions
  std::vector<DiffRow> routines;  // every other kind (blas, onednn, native, ...)
  std::vector<ShapeDiffRow> shapes;
};

// From each file's `run_totals`, `hotspots` and `gemm_shapes` views; rows by time before (then
// after), largest first.
ProfileDiff compute_diff(const ProfileFile& before, const ProfileFile& after);

Table diff_table(const std::vector<DiffRow>& rows);
Table shape_diff_table(const std::vector<ShapeDiffRow>& rows);
// `sonde diff --format csv`: the phases and the routines in one table, a `section` column first
// (phase, routine); the GEMM shapes are in the JSON.
Table diff_csv_table(const ProfileDiff& diff);
std::string render_diff_text(const ProfileDiff& diff);
Json render_diff_json(const std::string& before_path, const std::string& after_path,
                      const ProfileDiff& diff);

}  // namespace sonde::analyzers
