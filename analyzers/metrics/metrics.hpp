// Derived metrics (docs/metrics.md): GFLOP/s, % of peak, arithmetic intensity and the roofline
// per routine and per GEMM shape, and the time per phase. Shared by `sonde candidates` and
// `sonde diff`; computed once here, rendered elsewhere.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// What the run says about its machine and BLAS (first run of the file; run-wide rows win over
// per-process rows, the root process over others).
struct RunFacts {
  std::optional<std::int64_t> cores;           // runs.cores
  std::optional<std::int64_t> affinity_cores;  // runs.affinity_cores
  std::optional<std::int64_t> blas_threads;    // run_info blas.threads
  std::optional<std::string> blas_library;
  std::optional<std::string> fpu_ftz, fpu_daz;  // "0" / "1"
  std::map<std::string, std::string> info;     // every run_info key
  // (resource, threads) -> value: GFLOP/s for gemm.*, GB/s for mem.bw.
  std::map<std::pair<std::string, std::int64_t>, double> peaks;

  // CPUs the program may use: affinity_cores, else cores.
  std::optional<std::int64_t> available_cores() const;
  // The peak of a resource at the run's BLAS thread count when the table has that row, else the
  // all-threads row (threads = 0); nullopt without either.
  std::optional<double> peak(std::string_view resource) const;
};

struct Roofline {
  std::optional<double> gflops;             // flops / time (GFLOP/s = FLOP per ns)
  std::optional<double> pct_peak;           // gflops / peak gemm.<dtype> x 100
  std::optional<double> intensity;          // flops / bytes (FLOP/byte)
  std::optional<double> attainable_gflops;  // min(peak, intensity x mem.bw)
  std::optional<std::string> bound;         // "compute" or "memory" (both peaks known)
};

// flops, bytes, time and the dtype of the peak to compare with.
Roofline roofline(const RunFacts& facts, double flops, double bytes, std::int64_t time_ns,
                  std::string_view dtype);

struct RoutineMetrics {
  std::string name;
  std::string kind;
  std::int64_t calls = 0;
  std::int64_t incl_ns = 0;  // recursive nodes left out
  std::int64_t excl_ns = 0;
  double flops = 0, bytes = 0;        // the routine's own nodes (its cost model)
  double flops_under = 0;             // its own and its callees' (outermost occurrences)
  std::int64_t blas_under_ns = 0;     // time of outermost blas/onednn calls beneath it
  std::string dtype;                  // of its GEMM shapes, else guessed from the name; may be ""
  double pct_total = 0;               // incl as % of the total
  Roofline perf;                      // from flops, bytes, incl_ns
};

struct ShapeMetrics {
  std::string routine;
  std::string call_site;
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype;
  std::int64_t calls = 0;
  std::int64_t time_ns = 0;
  double flops = 0, bytes = 0;
  Roofline perf;
};

struct Metrics {
  RunFacts facts;
  std::int64_t total_ns = 0;     // sum of the thread roots' inclusive time (100 %)
  std::int64_t wall_ns = 0;      // first process start to last process end (or flush); 0: unknown
  std::int64_t unmeasured_ns = 0;  // the thread roots' exclusive time
  std::vector<RoutineMetrics> routines;  // by inclusive time, largest first; roots left out
  std::vector<ShapeMetrics> shapes;      // by time, largest first

  // What "share of the run" is measured against: the wall time, else the threads' total (idle
  // library worker threads would otherwise dilute every share).
  std::int64_t run_ns() const { return wall_ns > 0 ? wall_ns : total_ns; }
};

RunFacts load_run_facts(const ProfileFile& file);
Metrics compute_metrics(const ProfileFile& file);

// Phases: routines of kind region and python, by inclusive time.
std::vector<const RoutineMetrics*> phases(const Metrics& metrics);
// "f32" for cblas_sgemm / sgemm_, "f64" for d..., "c64", "c128"; "" when unknown.
std::string dtype_from_name(std::string_view routine);

}  // namespace sonde::analyzers
