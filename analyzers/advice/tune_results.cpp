#include "advice/tune_results.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "metrics/noise.hpp"
#include "process/redact.hpp"
#include "profile/run_summary.hpp"

namespace sonde::analyzers {

std::string rule_of_stage(const std::string& stage) {
  if (stage == "blas-threads") return "blas-threads";
  if (stage == "framework-threads") return "framework-threads";
  if (stage == "ftz") return "subnormals";
  if (stage == "blas-kernels") return "blas-kernels";
  return "";
}

namespace fs = std::filesystem;
namespace {

std::optional<double> number_or_null(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string text_or(const Json& j, const char* key, const char* fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// The estimate is within noise of zero below a millisecond.
constexpr double kNothing = 0.001;

// A stage that was faster: the estimate stands when it is within a factor of kOff of what was
// measured; a rule that says 0.003 s where 0.1 s was gained found the right knob and the wrong
// size, and says which way.
constexpr double kOff = 2.0;
const char* size_verdict(double estimated_s, double measured_s) {
  if (estimated_s <= kNothing || estimated_s * kOff < measured_s) return "underestimated";
  if (estimated_s > measured_s * kOff) return "overestimated";
  return "confirmed";
}

}  // namespace

const char* measured_verdict(bool faster, double estimated_s, double measured_s, double smallest_s,
                             bool too_few_runs) {
  if (faster) return size_verdict(estimated_s, measured_s);
  if (estimated_s <= kNothing) return "confirmed";
  if (too_few_runs) return "unmeasured";
  // A stage slower beyond the noise refutes any gain, however small the estimate.
  return estimated_s >= smallest_s || measured_s <= -smallest_s ? "refuted" : "unmeasured";
}

TuneResults read_tune_results(const std::string& path) {
  fs::path file = fs::is_directory(path) ? fs::path(path) / kTuneResultFile : fs::path(path);
  std::ifstream in(file);
  if (!in)
    throw Error(
        fmt::format("no sonde tune result at {} (sonde tune -o DIR writes "
                    "DIR/{})",
                    file.string(), kTuneResultFile));
  Json j = Json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("stages") || !j["stages"].is_array())
    throw Error(fmt::format("{} is not a sonde tune result", file.string()));
  TuneResults r;
  r.path = file.string();
  if (auto c = j.find("command"); c != j.end() && c->is_array())
    for (const Json& w : *c)
      if (w.is_string()) r.command.push_back(w.get<std::string>());
  for (const Json& s : j["stages"]) {
    if (!s.is_object()) continue;
    TuneStageResult t;
    t.name = text_or(s, "name");
    t.rule = text_or(s, "rule", rule_of_stage(t.name).c_str());
    t.verdict = text_or(s, "verdict");
    t.judged_on = text_or(s, "judged_on", "wall");
    t.speedup = number_or_null(s, "speedup").value_or(0);
    t.estimated_gain_s = number_or_null(s, "estimated_gain_s");
    t.measured_gain_s = number_or_null(s, "measured_gain_s");
    t.smallest_gain_s = number_or_null(s, "smallest_gain_s").value_or(0);
    t.output_changed = s.value("output_changed", false);
    if (auto runs = s.find("runs"); runs != s.end() && runs->is_array())
      for (const Json& run : *runs) t.profiles.push_back(text_or(run, "profile"));
    r.stages.push_back(std::move(t));
  }
  return r;
}

std::string tune_of_another_command(const TuneResults& tune, const std::string& profile_command) {
  if (tune.command.size() < 2 || profile_command.empty()) return "";
  std::vector<std::string> mine = shell_words(program_command(profile_command));
  std::vector<std::string> theirs(tune.command.begin() + 1, tune.command.end());
  if (theirs.size() <= mine.size() &&
      std::equal(theirs.begin(), theirs.end(), mine.end() - std::ptrdiff_t(theirs.size())))
    return "";
  return fmt::format(
      "warning: sonde tune ran another command ({}) than this profile's ({}): what it measured "
      "may not hold here",
      shell_line(tune.command), program_command(profile_command));
}

std::optional<TuneResults> tune_results_beside(const std::string& profile) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(profile, ec);
  if (ec) return std::nullopt;
  fs::path json = p.parent_path() / kTuneResultFile;
  if (!fs::exists(json, ec)) return std::nullopt;
  try {
    TuneResults r = read_tune_results(json.string());
    for (const TuneStageResult& s : r.stages)
      for (const std::string& run : s.profiles)
        if (fs::weakly_canonical(run, ec) == p) return r;
  } catch (const Error&) {  // not tune's: this profile has no tune result
  }
  return std::nullopt;
}

std::vector<std::string> apply_tune_results(std::vector<Candidate>& candidates,
                                            const TuneResults& tune) {
  std::vector<std::string> unpredicted;
  std::size_t original_runs = 0;
  for (const TuneStageResult& s : tune.stages)
    if (s.name == "original") original_runs = s.profiles.size();
  for (const TuneStageResult& s : tune.stages) {
    if (s.rule.empty() || s.verdict.empty()) continue;  // the original; a stage that did not run
    double measured = s.measured_gain_s.value_or(0);
    bool faster = s.verdict == "faster";
    bool any = false;
    for (Candidate& c : candidates) {
      if (c.rule != s.rule) continue;
      // Two stages test blas-threads: the one that measured more speaks for it.
      if (c.measured && c.measured->measured_s >= measured) continue;
      MeasuredGain m;
      m.stage = s.name;
      m.judged_on = s.judged_on;
      // The estimate the reader sees, this profile's: tune's own is of its original's first
      // run, where the rule may not have fired (a red-team `--tune DIR` read "estimated 0.000 s,
      // measured -4.102 s: confirmed" beside a candidate of 0.088 s at the top of the list).
      m.estimated_s = c.est_gain_s;
      m.measured_s = measured;
      m.verdict = measured_verdict(faster, m.estimated_s, measured, s.smallest_gain_s,
                                   too_few_runs(original_runs, s.profiles.size()));
      m.source = tune.path;
      c.measured = m;
      any = true;
    }
    if (!any && faster)
      unpredicted.push_back(fmt::format(
          "sonde tune measured {:.3f} s of {} time gained by stage {} ({:.2f}x), which no {} "
          "candidate predicted",
          measured, s.judged_on == "cpu" ? "CPU" : "wall", s.name, s.speedup, s.rule));
  }
  return unpredicted;
}

}  // namespace sonde::analyzers
