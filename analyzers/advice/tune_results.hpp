// Candidates that learn from `sonde tune`: tune keeps its result as DIR/tune.json, and
// `sonde candidates` holds each rule's estimate against what tune measured for the stage that
// tests it (ftz for subnormals, the thread stages for blas-threads).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advice/candidates.hpp"

namespace sonde::analyzers {

inline constexpr const char* kTuneResultFile = "tune.json";

struct TuneStageResult {
  std::string name, rule, verdict, judged_on;  // verdict: faster, slower, none
  double speedup = 0;
  std::optional<double> estimated_gain_s, measured_gain_s;
  // The least gain tune could tell from the original's spread (its minimum effect and seconds
  // against the original's time); 0 in a tune.json before 2026-12-05.
  double smallest_gain_s = 0;
  bool output_changed = false;
  std::vector<std::string> profiles;  // the stage's runs
};

struct TuneResults {
  std::string path;                     // the tune.json read
  std::vector<TuneStageResult> stages;  // the original's first
  std::vector<std::string> command;     // the command tune ran (secret-looking values redacted)
};

// Where tune ran another program than the profile's (its command's words after the interpreter
// are no tail of the profile's program command, run_summary's program_command): the sentence
// saying so, else "". A red-team `--tune DIR` of another script applied its "refuted" unsaid.
std::string tune_of_another_command(const TuneResults& tune, const std::string& profile_command);

// DIR/tune.json, or the file itself when `path` names one. Throws Error when it is missing or
// not a tune result.
// The candidate rule whose estimate a `sonde tune` stage tests ("" for none): what tune writes
// into tune.json, and what a tune.json written before it named the rule is read with.
std::string rule_of_stage(const std::string& stage);

TuneResults read_tune_results(const std::string& path);
// The tune.json beside `profile` when that profile is one of its runs (sonde tune's own -o
// folder), else nothing.
std::optional<TuneResults> tune_results_beside(const std::string& profile);

// What a stage's measurement says of its rule's estimate: the one verdict `sonde tune`'s report
// and `sonde candidates`' measured line both print. A stage faster beyond the noise: confirmed
// where the estimate is within 2x of the gain, else overestimated or underestimated (an
// estimate of nothing, under a millisecond, is underestimated: the rule missed it); a stage
// that was not: refuted where the rule estimated a gain tune could have told (at least
// `smallest_s`), unmeasured where it estimated less (a red-team tune "refuted" 0.003 s, under
// its own 0.020 s floor), confirmed where it estimated nothing. A stage of too few runs to tell
// (metrics/noise.hpp's too_few_runs) refutes nothing, however it ran: unmeasured (a red-team
// tune's blas-threads won both its runs, 1.60x, and read "the measurement refutes it").
const char* measured_verdict(bool faster, double estimated_s, double measured_s, double smallest_s,
                             bool too_few_runs);

// Sets each candidate's `measured` from the stage that tests its rule. Returns one sentence per
// stage that measured a gain no candidate predicted (the rule did not fire, or estimated 0).
std::vector<std::string> apply_tune_results(std::vector<Candidate>& candidates,
                                            const TuneResults& tune);

}  // namespace sonde::analyzers
