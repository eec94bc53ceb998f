// Derived metrics (docs/metrics.md): GFLOP/s, % of peak, arithmetic intensity and the roofline
// per routine and per GEMM shape, and the time per phase. Shared by `sonde candidates` and
// `sonde diff`; computed once here, rendered elsewhere.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "profile/call_tree.hpp"
#include "profile/profile_file.hpp"

namespace sonde::analyzers {

// What the run says about its machine and BLAS (first run of the file; run-wide rows win over
// per-process rows, the root process over others).
struct RunFacts {
  std::optional<std::int64_t> cores;           // runs.cores
  std::optional<std::int64_t> affinity_cores;  // runs.affinity_cores
  std::optional<std::int64_t> blas_threads;    // run_info blas.threads
  // run_info cpu.quota: the cgroup's CPU quota in cores (a container's --cpus, a pod's limit).
  std::optional<double> cpu_quota;
  std::optional<std::string> blas_library;
  std::optional<std::string> fpu_ftz, fpu_daz;  // "0" / "1"
  std::map<std::string, std::string> info;      // every run_info key
  // The peaks table as recorded: (resource, threads) -> value, GFLOP/s for gemm.*, GB/s for
  // mem.bw; threads 0 = all.
  std::map<std::pair<std::string, std::int64_t>, double> peaks;
  // The peaks_at_threads view: (resource, thread count) -> the peak work on that many threads
  // is held against (the nearest calibrated count not above it).
  std::map<std::pair<std::string, std::int64_t>, double> peaks_at;
  // Where each resource's peaks came from (peaks.source): calibrated, manual (sonde calibrate
  // --set) or forced (kept though they failed calibrate's checks); a resource with rows of
  // several sources takes the first not calibrated.
  std::map<std::string, std::string> peak_sources;
  // "calibrated", "hand-set", "forced": what a message calls the peak of `resource` (the gain
  // bounds said "calibrated" of hand-set peaks that measured GEMMs ran 46 % above).
  std::string peak_word(std::string_view resource) const;
  // Several resources' one word where they share it, else "given".
  std::string peak_word(std::initializer_list<std::string_view> resources) const;

  // The most ranks of the file's run on one host (1: not a ranked run): from the ranks the
  // file holds, their local ranks, and the launcher's local size (a rank's own file holds one).
  std::int64_t ranks_on_host = 1;

  // CPUs the program may use: affinity_cores, else cores; at most the cgroup's CPU quota in
  // whole cores (from 0.75 of one up; at least 1): a thread past it waits for the next period.
  std::optional<std::int64_t> available_cores() const;
  // Whether the cgroup's CPU quota is what sets available_cores (fewer whole cores than the
  // CPUs the mask names).
  bool quota_binds() const;
  // One rank's share of them: the ranks on a host share its cores (at least 1). What a thread
  // count is held against: 2 ranks on 2 cores each given 2 BLAS threads oversubscribe them.
  std::optional<std::int64_t> cores_per_rank() const;
  // peaks_at for `threads`; nullopt without a thread count or a peak at or below it.
  std::optional<double> peak_at(std::string_view resource,
                                std::optional<std::int64_t> threads) const;
};

// A routine's or shape's rates and ceilings, as the routine_metrics and gemm_shapes views
// define them (none: no FLOPs, bytes or peak to say).
struct Roofline {
  std::optional<double> gflops;             // flops / time (GFLOP/s = FLOP per ns)
  std::optional<double> pct_peak;           // gflops / peak gemm.<dtype> x 100
  std::optional<double> intensity;          // flops / bytes (FLOP/byte)
  std::optional<double> attainable_gflops;  // min(peak, intensity x mem.bw)
  std::optional<std::string> bound;         // "compute" or "memory" (both peaks known)
  // The ceilings it is held against: the GEMM peak (GFLOP/s) and memory bandwidth (GB/s) at
  // the thread count the work ran with (time-weighted where its calls ran with several).
  std::optional<double> peak_gflops, mem_bw_gbs;
};

struct RoutineMetrics {
  std::int64_t routine_id = 0;  // its identity in the file (names may repeat)
  std::string name;
  std::string kind;
  std::string library;  // routines.library: `c10d` for torch.distributed's calls, ...
  std::int64_t calls = 0;
  std::int64_t incl_ns = 0;  // recursive nodes left out
  std::int64_t excl_ns = 0;
  double flops = 0, bytes = 0;     // the routine's own nodes (its cost model)
  double flops_under = 0;          // its own and its callees' (outermost occurrences)
  std::int64_t blas_under_ns = 0;  // time of outermost blas/onednn calls beneath it
  std::string dtype;               // of its GEMM shapes, else routines.dtype; may be ""
  double pct_total = 0;            // incl as % of the total (the hotspots view's incl_pct)
  // A phase's figures: GFLOP/s of everything beneath it, and the share of its time in the
  // outermost blas/onednn calls beneath it; none when it took no time.
  std::optional<double> gflops_under, blas_pct;
  // The routine_metrics view's: its peaks those of its GEMM shapes' thread counts, else at the
  // process's blas.threads.
  Roofline perf;
  // The thread count those peaks are for: its shapes' when all ran with one, blas.threads for
  // a routine without shapes; none when its shapes ran with several (a time-weighted peak).
  std::optional<std::int64_t> threads;
};

struct ShapeMetrics {
  std::int64_t routine_id = 0;  // the routine's identity; two of one name are two routines
  std::string routine;
  std::string call_site;
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype;
  std::int64_t calls = 0;
  std::int64_t time_ns = 0;
  double flops = 0, bytes = 0;
  std::optional<std::int64_t> threads;  // when all its calls ran with one count
  Roofline perf;                        // as the gemm_shapes view has them
};

struct Metrics {
  RunFacts facts;
  std::int64_t total_ns = 0;       // sum of the thread roots' inclusive time (100 %)
  std::int64_t wall_ns = 0;        // first process start to last process end (or flush); 0: unknown
  std::int64_t unmeasured_ns = 0;  // the thread roots' exclusive time
  std::int64_t setup_ns = 0;       // inside set-up frames (setup_time: imports, MPI_Init, ...)
  std::vector<RoutineMetrics> routines;  // by inclusive time, largest first; roots left out
  std::vector<ShapeMetrics> shapes;      // by time, largest first

  // The run's duration (the iteration breakdown's whole): the wall time, else the threads' total.
  std::int64_t run_ns() const { return wall_ns > 0 ? wall_ns : total_ns; }
  // What a candidate's "% of the run" is of: the busy threads' time outside set-up, `sonde
  // report`'s 100 % (run_totals.thread_s) less the imports, the interpreter's start-up and
  // teardown and communication set-up (setup_time), which no rule's advice changes: a short
  // run's `import torch` read every share of its loop at half its size. Its numerators are
  // summed over threads and processes too, so no share passes 100 %; against the wall time a
  // GEMM on 4 processes took 203.8 %. A run that is all set-up keeps the whole busy time.
  std::int64_t share_base_ns() const {
    if (total_ns > setup_ns && setup_ns > 0) return total_ns - setup_ns;
    return total_ns > 0 ? total_ns : wall_ns;
  }
};

// What the candidates' shares are of, in one line: "" where the run had no set-up to leave out.
std::string share_base_text(const Metrics& metrics);

RunFacts load_run_facts(const ProfileFile& file);
Metrics compute_metrics(const ProfileFile& file);
// The same from the file's thread trees, already loaded (LoadedProfile shares them).
Metrics compute_metrics(const ProfileFile& file, const std::vector<ThreadTree>& trees);

// Phases: routines of kind region and python, by inclusive time.
std::vector<const RoutineMetrics*> phases(const Metrics& metrics);

// One line per GEMM dtype whose shapes ran faster than its peak (gemm_shapes.pct_peak above
// 105 %): the peaks are not this machine's (hand-set, or another machine's file), and every
// figure held against them with them. Hand-set peaks a red team's GEMMs ran 46 % above were
// used for gain bounds that called them calibrated, without a word. Said by sonde shapes and
// sonde candidates.
std::vector<std::string> peaks_exceeded(const ProfileFile& file);

}  // namespace sonde::analyzers
