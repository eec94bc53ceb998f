// `sonde diff A B`, or `sonde diff A1 A2 A3 -- B1 B2 B3`: time per phase and per routine before
// (A) and after (B) with the speedup, like a tuning-stage table, and GEMM GFLOP/s per shape.
// With several runs a side, each figure is the median of its runs with their min-max, and the
// noise rule (metrics/noise.hpp) says whether the sides differ beyond the noise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "metrics/noise.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// One routine, matched between the files by its identity (kind, library, file, line, name):
// two routines of one display name are two rows.
struct DiffRow {
  std::string name;
  std::string kind;
  std::string library;
  std::string file;
  std::int64_t line = 0;
  std::optional<std::int64_t> before_ns, after_ns;  // inclusive, the median of the runs it is in;
                                                    // nullopt: in no run of that side
  Spread before, after;                             // the same in ns, with min-max and runs
  std::optional<double> speedup;  // before / after (medians), both present and after > 0
  Noise noise = Noise::kUnknown;  // kUnknown also where a side has one run
  std::string status;             // "both", "only before", "only after"
  // A Python function whose line moved between the sides (an edit above its def): its name
  // before, where the name above is the after side's; "" for a routine matched as it is.
  std::string before_name;
};

struct ShapeDiffRow {
  std::string routine, call_site, dtype;
  // The call site before, where it is a Python function whose line moved (DiffRow::before_name).
  std::string before_call_site;
  std::int64_t m = 0, n = 0, k = 0;
  std::optional<double> gflops_before, gflops_after;  // medians
  Spread before, after;                               // GFLOP/s
  std::optional<double> ratio;                        // after / before: > 1 is faster
  Noise noise = Noise::kUnknown;
  std::string status;
};

// A whole-run figure (wall time, the busy threads' time) on each side.
struct DiffTotal {
  Spread before, after;  // ns
  std::optional<double> speedup;
  Noise noise = Noise::kUnknown;
};

struct ProfileDiff {
  std::size_t runs_before = 1, runs_after = 1;
  std::int64_t total_before_ns = 0, total_after_ns = 0;      // wall time: the run's total (median)
  std::optional<double> total_speedup;                       // wall time before / after
  std::int64_t threads_before_ns = 0, threads_after_ns = 0;  // the busy threads' time (median)
  DiffTotal total, threads;
  std::vector<DiffRow> phases;    // regions and Python functions
  std::vector<DiffRow> routines;  // every other kind (blas, onednn, native, ...)
  std::vector<ShapeDiffRow> shapes;
  // A phase's or routine's change of no more than this is "under the floor", however apart
  // its runs: kDiffRowFloorNs, or kDiffRowFloorShare of the busy threads' time, the larger.
  std::int64_t row_floor_ns = 0;
  // What makes the runs compare different work: collection windows, commands, thread counts
  // that differ between (or within) the sides; one line each.
  std::vector<std::string> warnings;
};

// The rows' floor. A run in a quieter moment is faster in every routine at once, so one
// ordering of the runs, 1 in 20 with three a side, set every row apart: diffing three runs of
// a torch MLP with SONDE_FTZ=1 against three without (tune: "in the noise") called 46 of 132
// phases and 11 of 35 routines "beyond noise", each 20-170 us apart in a 1.5 s run, in code
// the flags cannot touch (a red-team find).
inline constexpr std::int64_t kDiffRowFloorNs = 1'000'000;
inline constexpr double kDiffRowFloorShare = 0.001;

// From each file's `run_totals`, `hotspots` and `gemm_shapes` views; rows by time before (then
// after), largest first.
ProfileDiff compute_diff(const std::vector<const ProfileFile*>& before,
                         const std::vector<const ProfileFile*>& after);
ProfileDiff compute_diff(const ProfileFile& before, const ProfileFile& after);

}  // namespace sonde::analyzers
