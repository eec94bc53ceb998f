// `sonde candidates`: tuning candidates from a rule engine whose rules are data (kRules), each
// candidate with its numbers as evidence and an estimated gain, ranked by that gain.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "advice/debug_tools.hpp"
#include "advice/distribution_checks.hpp"
#include "advice/einsum_calls.hpp"
#include "advice/loader_workers.hpp"
#include "advice/op_loops.hpp"
#include "advice/optimizer_work.hpp"
#include "base/table_format.hpp"
#include "metrics/breakdown.hpp"
#include "metrics/gpu_summary.hpp"
#include "metrics/loaded_profile.hpp"
#include "metrics/metrics.hpp"
#include "metrics/operator_flops.hpp"
#include "metrics/ranks.hpp"
#include "profile/line_costs.hpp"
#include "profile/profile_file.hpp"
#include "profile/run_summary.hpp"

namespace sonde::analyzers {

// Everything a rule may look at, loaded once.
struct AdviceInput {
  Metrics metrics;
  // The most threads of one process that called the BLAS: a program's own thread pool running
  // GEMMs side by side holds the cores its BLAS threads would take.
  std::int64_t blas_calling_threads = 0;
  std::vector<Note> notes;
  LineCosts lines;  // empty when the file has none
  // Per optimizer-like phase (by name): the optimizer-like phases beneath it and the other work
  // it calls, from the calling-context trees (advice/optimizer_work.hpp).
  std::map<std::string, OptimizerWork> optimizer_work;
  // The program's own Python functions with small torch/numpy calls beneath them
  // (advice/op_loops.hpp), largest first.
  std::vector<OpLoop> op_loops;
  std::vector<MatrixVectorSite> matrix_vector;  // BLAS GEMV calls by caller, largest first
  GpuSummary gpu;                               // empty for CPU-only runs
  RankSummary ranks;                            // one rank: nothing to compare
  // The busy threads' own time outside any measured routine, each (thread_times), largest first.
  struct ThreadUnmeasured {
    std::string name;
    std::int64_t seq = 0;  // 0: the thread that loaded sonde (the program's main one)
    std::int64_t unmeasured_ns = 0;
  };
  std::vector<ThreadUnmeasured> unmeasured_threads;
  Breakdown breakdown;   // the iteration breakdown (no phase mappings); found false: no loop
  LoaderWorkers loader;  // torch DataLoader workers (none: num_workers=0, or no Python hook)
  DistributionChecks distributions;  // torch.distributions' argument checks
  EinsumCalls einsum;                // numpy.einsum in its own C loop (no optimize)
  DebugTools debug;                  // anomaly mode and the PyTorch profiler, left on
  // GEMM operators' FLOPs from their recorded shapes, by routine_id (--record-shapes; empty
  // without it).
  std::map<std::int64_t, OperatorFlops> operator_flops;
  // The host's 1-minute load average at the run's last flush (run_info host.load), and the run's
  // own share of it: its threads' CPU time over its wall time. Absent in files before it.
  std::optional<double> host_load, own_load;
  // Other programs' load over the run, measured: the host's busy CPU time over the root
  // process's life (run_info host.cpu_busy_s, host.cpu_window_s) less the run's own threads',
  // over that window. Absent in older files and for a life under a second (/proc/stat counts
  // in 10 ms ticks); the load average above stands in then.
  std::optional<double> others_load;
  // The busiest thread's CPU time over its life (thread_times cpu_s / time_s): under 1 where
  // it waited for a CPU, or blocked. Absent where the kernel's per-thread clock was not read.
  std::optional<double> busiest_cpu_share;
  // The first process's first thread (the training loop's, mostly): the time it was neither on
  // a core nor waiting for one (its life less its CPU time and run_info thread.runq_s), blocked
  // in I/O, a sleep or a lock. Absent in files before 2026-12-07.
  std::optional<double> loop_blocked_s;
  // Per matrix-product routine (BLAS GEMMs and SYRKs, oneDNN primitives), the time of its
  // outermost calls made beneath a torch operator (torch_gemm_time in dtype_rules.hpp): what
  // torch.autocast would run in bfloat16, not a numpy GEMM of the same program. Filled only
  // where run_info cpu.bf16 is (the bfloat16 rule, its one reader).
  std::map<std::int64_t, std::int64_t> gemm_under_torch_ns;
};

// What `sonde tune` measured for the stage that tests a candidate's rule (advice/tune_results.hpp).
struct MeasuredGain {
  std::string stage, judged_on;  // judged_on: wall or cpu
  double estimated_s = 0, measured_s = 0;
  std::string verdict;  // confirmed, refuted (estimated a gain, none measured), underestimated
  std::string source;   // the tune.json
};

struct Candidate {
  std::string rule;                        // Rule::id
  std::string location;                    // routine, shape or "run"
  std::optional<std::int64_t> routine_id;  // when the location is one routine of the file
  std::string summary;                     // one sentence with the numbers
  std::vector<std::pair<std::string, Cell>> evidence;  // in reading order
  std::string advice;
  double est_gain_s = 0;
  std::optional<MeasuredGain> measured;  // when a sonde tune result was given
  // The limit the estimate is held to, in one sentence: the calibrated peak or memory
  // bandwidth that applies, or why none does.
  std::string gain_bound;
};

struct Rule;
using RuleFunction = std::vector<Candidate> (*)(const AdviceInput& input, const Rule& rule);

struct Rule {
  std::string_view id;
  std::string_view description;  // when it fires
  double threshold;              // the rule's one knob (its meaning is in description)
  std::string_view advice;       // what to do
  std::string_view gain;         // the estimated-gain formula, as documented
  RuleFunction evaluate;
};

// The rule table, in documentation order.
std::span<const Rule> rules();

AdviceInput load_advice_input(const ProfileFile& file);
AdviceInput load_advice_input(LoadedProfile& profile);
// Every rule's candidates, best (largest est_gain_s) first; ties by rule order, then in the
// order the rule ranks them.
std::vector<Candidate> evaluate_rules(const AdviceInput& input, std::span<const Rule> rules);
std::vector<Candidate> compute_candidates(const ProfileFile& file);
std::vector<Candidate> compute_candidates(LoadedProfile& profile);

// Names matched by the optimizer rule: update, adam, sgd, optimizer (case-insensitive) in the
// function part of a Python routine or in a region name, or a moving average of the weights
// (the words ema, ewma, swa, or moving and average).
bool looks_like_optimizer(std::string_view routine_name);

}  // namespace sonde::analyzers
