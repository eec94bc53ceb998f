// `sonde tune`: the tuning-stage table of the Chainer-on-K poster, measured instead of estimated.
// The command runs under sonde as it is (the original), then once per stage with that stage's
// knobs (environment variables sonde or the program's libraries read), every run a profile of its
// own in the output folder; rounds interleave the original and the stages so that a change in the
// machine's load falls on both.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/table_format.hpp"
#include "metrics/noise.hpp"
#include "programs/tune_output.hpp"

namespace sonde::analyzers {

struct TuneOptions {
  int repeat = 3;
  std::vector<std::string> stages;  // empty: every stage that applies here
  std::string output_dir = "sonde-tune";
  double timeout_s = 0;  // per run; 0: none
  std::vector<std::string> command;
};

struct Knob {
  std::string variable, value;
};

// One run of the command: its wall time as sonde tune saw it (fork to wait), how it ended.
struct TuneRun {
  double wall_s = 0;
  // The CPU time of the run's busy threads (the profile's thread_times.cpu_s); where the profile
  // lacks it, user + system of the command and the children it waited for.
  double cpu_s = 0;
  bool ok = false;
  std::string ended;    // "exit 3", "killed by SIGSEGV", "timed out after 5 s" when not ok
  std::string profile;  // the profile it wrote (path)
  std::string stdout_path, stderr_path;
};

enum class Verdict { kFaster, kSlower, kNone };

struct TuneStage {
  std::string name;
  std::vector<Knob> knobs;
  std::string status = "ran";  // ran, failed, skipped
  std::string reason;          // why failed or skipped
  std::vector<TuneRun> runs;
  double median_s = 0, min_s = 0, max_s = 0;  // wall
  double cpu_median_s = 0, cpu_min_s = 0, cpu_max_s = 0;
  // What the verdict and the speedup compare: wall time for stages that change thread counts,
  // CPU time otherwise (the load of a shared machine moves wall time by 2x; CPU time far less).
  bool by_cpu = false;
  std::optional<double> speedup;  // original's median / this median, in by_cpu's measure
  Verdict verdict = Verdict::kNone;
  std::map<std::string, double> phases;  // the original's top routines: median exclusive s
  // The stage's stdout against the original's (programs/tune_output.hpp): of its runs, the one
  // that differs from every original run, else the one farthest from its nearest original.
  std::optional<OutputComparison> output;
  bool output_changed = false;    // output->differs()
  std::string output_difference;  // output_detail(): the counts and the first line pair
  // What else the knobs changed, as the runs' profiles record it against the original's: the
  // CPUs the process could run on, the BLAS's and torch's thread counts, where the stage is not
  // meant to (a red-team pinning stage bound a torch program to one core, and its 1.13x was
  // that). One "what: stage's (original's)" each.
  std::vector<std::string> side_effects;
  std::optional<double> estimated_gain_s;  // the candidate rule's estimate on the original
  std::optional<double> measured_gain_s;   // original's median - this median, when not none
  // The least gain the verdict could tell: kTuneMinSeconds, or kTuneMinEffect of the
  // original's median where more.
  double smallest_gain_s = 0;
  std::string rule;  // that candidate rule
};

struct TuneResult {
  std::vector<std::string> command;
  int repeat = 0;
  int cores = 0;
  std::string output_dir;
  std::vector<std::string> phase_names;  // the columns, in the original's order
  std::vector<TuneStage> stages;         // the original first
  std::vector<std::string> notes;
  // The signal (SIGINT, SIGTERM, SIGHUP) that stopped tune before its last run, 0 if none: the
  // run under way was ended (its process group sent SIGTERM, then SIGKILL), no other started,
  // and the result holds the runs that completed; the caller writes it, then ends by the signal.
  int interrupted_by = 0;
};

// The stages sonde knows, for --help and --stages checks.
std::vector<std::string> tune_stage_names();

// Runs everything; a program that fails as it is throws Error (nothing to compare against), a
// program that fails under a stage is reported in that stage.
TuneResult run_tune(const TuneOptions& options);

// The rule (metrics/noise.hpp, which `sonde diff` applies too): a stage is faster (slower) only
// when every one of its runs is faster (slower) than every run of the original and the medians
// differ by more than kTuneMinEffect, and by more than kTuneMinSeconds (a launch's own jitter: a
// 5 ms program's 3 % is not a finding). "Every run of one beat every run of the other" also
// happens with no effect at all, in one of the C(n + m, n) orders the runs can fall in: 1 in 2
// for a run each, 1 in 6 for two. No verdict where that chance is over kTuneMaxChance (three
// runs each: 1 in 20).
inline constexpr double kTuneMinEffect = kNoiseMinEffect;
inline constexpr double kTuneMinSeconds = 0.02;
inline constexpr double kTuneMaxChance = kNoiseMaxChance;
bool tune_too_few_runs(std::size_t original_runs, std::size_t stage_runs);
Verdict tune_verdict(const std::vector<double>& original, const std::vector<double>& stage);

Table tune_table(const TuneResult& result);
std::string render_tune_text(const TuneResult& result);
Json render_tune_json(const TuneResult& result);

}  // namespace sonde::analyzers
