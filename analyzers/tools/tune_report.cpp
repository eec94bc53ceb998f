// sonde tune's rule for noise, its comparison of outputs, and its table.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <regex>
#include <sstream>

#include "tools/tune.hpp"

namespace sonde::analyzers {
namespace {

// Lines that carry a result: loss, accuracy and their usual spellings.
bool result_line(const std::string& line) {
  static const std::regex words(R"((loss|acc|accuracy|error|err|perplexity|ppl|score|f1|auc|mse|rmse))",
                                std::regex::icase);
  return std::regex_search(line, words);
}

// A program's own timings ("310 usec per loop", "epoch 3 loss 0.41 time 2.1s") differ between
// any two runs, so they are no result: each is replaced by one token before lines are compared,
// leaving the loss beside it, and `python3 -m timeit` is not said to change its results.
std::string without_timings(const std::string& line) {
  static const std::regex timed(
      R"((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*(ns|nsec|us|usec|µs|ms|msec|s|sec|secs|seconds?|minutes?|min|h|hours?)\b)");
  static const std::regex after_word(
      R"(\b(time|elapsed|took|duration|speed|throughput)(\s*[:=]?\s*)[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)",
      std::regex::icase);
  return std::regex_replace(std::regex_replace(line, timed, "<time>"), after_word, "$1$2<time>");
}

std::vector<std::string> result_lines(const std::string& text) {
  std::vector<std::string> lines, all;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line = without_timings(line);
    all.push_back(line);
    if (result_line(line)) lines.push_back(line);
  }
  return lines.empty() ? all : lines;  // no such line: the whole output counts
}

std::vector<double> numbers(const std::string& line) {
  static const std::regex number(R"([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(nan|inf))",
                                 std::regex::icase);
  std::vector<double> out;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), number); it != std::sregex_iterator(); ++it)
    out.push_back(std::strtod(it->str().c_str(), nullptr));
  return out;
}

std::string shorten(const std::string& line) {
  return line.size() > 80 ? line.substr(0, 77) + "..." : line;
}

}  // namespace

bool tune_too_few_runs(std::size_t original_runs, std::size_t stage_runs) {
  double orders = 1;  // C(n + m, m), built up term by term
  for (std::size_t i = 1; i <= stage_runs; ++i)
    orders = orders * static_cast<double>(original_runs + i) / static_cast<double>(i);
  return 1 / orders > kTuneMaxChance;
}

Verdict tune_verdict(const std::vector<double>& original, const std::vector<double>& stage) {
  if (original.empty() || stage.empty() || tune_too_few_runs(original.size(), stage.size()))
    return Verdict::kNone;
  auto [omin, omax] = std::minmax_element(original.begin(), original.end());
  auto [smin, smax] = std::minmax_element(stage.begin(), stage.end());
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  };
  double ratio = med(original) / med(stage);
  if (std::fabs(med(original) - med(stage)) <= kTuneMinSeconds) return Verdict::kNone;
  if (*smax < *omin && ratio > 1 + kTuneMinEffect) return Verdict::kFaster;
  if (*smin > *omax && ratio < 1 / (1 + kTuneMinEffect)) return Verdict::kSlower;
  return Verdict::kNone;
}

std::string compare_outputs(const std::string& before, const std::string& after) {
  std::vector<std::string> a = result_lines(before), b = result_lines(after);
  if (a.size() != b.size())
    return fmt::format("{} result lines instead of {}", b.size(), a.size());
  double worst = 0;
  std::string first;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) continue;
    std::vector<double> x = numbers(a[i]), y = numbers(b[i]);
    double rel = HUGE_VAL;
    if (x.size() == y.size()) {
      rel = 0;
      for (std::size_t j = 0; j < x.size(); ++j) {
        double scale = std::max(std::fabs(x[j]), std::fabs(y[j]));
        if (x[j] != y[j]) rel = std::max(rel, scale > 0 ? std::fabs(x[j] - y[j]) / scale : HUGE_VAL);
      }
    }
    if (first.empty()) first = fmt::format("'{}' -> '{}'", shorten(a[i]), shorten(b[i]));
    worst = std::max(worst, rel);
  }
  if (first.empty()) return "";
  return std::isfinite(worst) ? fmt::format("{} (largest relative difference on the result lines {:.2g})", first, worst)
                              : first;
}

Table tune_table(const TuneResult& r) {
  std::size_t original_runs = 0;
  for (const TuneStage& s : r.stages)
    if (s.name == "original") original_runs = s.runs.size();
  Table t;
  t.columns = {{"stage", "stage", 0}, {"knobs", "knobs", 0}};
  for (const std::string& p : r.phase_names) t.columns.push_back({p + " s", p, 3});
  t.columns.insert(t.columns.end(),
                   {{"total s", "total_s", 3},         {"min-max s", "range", 0},
                    {"cpu s", "cpu_s", 3},              {"cpu min-max s", "cpu_range", 0},
                    {"speedup", "speedup", 0},         {"est. gain s", "estimated_gain_s", 3},
                    {"measured gain s", "measured_gain_s", 3}, {"output", "output", 0}});
  for (const TuneStage& s : r.stages) {
    std::vector<Cell> row;
    row.push_back(s.name);
    std::string knobs;
    for (const Knob& k : s.knobs) knobs += (knobs.empty() ? "" : " ") + k.variable + "=" + k.value;
    row.push_back(knobs.empty() ? std::string("-") : knobs);
    bool measured = !s.runs.empty() && s.median_s > 0;
    for (const std::string& p : r.phase_names) {
      auto it = s.phases.find(p);
      row.push_back(it == s.phases.end() ? Cell{} : Cell{it->second});
    }
    row.push_back(measured ? Cell{s.median_s} : Cell{});
    row.push_back(measured ? Cell{fmt::format("{:.3f}-{:.3f}", s.min_s, s.max_s)} : Cell{});
    row.push_back(measured ? Cell{s.cpu_median_s} : Cell{});
    row.push_back(measured ? Cell{fmt::format("{:.3f}-{:.3f}", s.cpu_min_s, s.cpu_max_s)} : Cell{});
    std::string speed;
    if (s.status != "ran") speed = s.status + ": " + s.reason;
    else if (s.name == "original") speed = "1.00x";
    else if (s.verdict == Verdict::kNone)
      speed = fmt::format("none ({:.2f}x {}, {})", s.speedup.value_or(0), s.by_cpu ? "cpu" : "wall",
                          tune_too_few_runs(original_runs, s.runs.size())
                              ? "too few runs to tell: --repeat 3 or more"
                              : "in the noise");
    else speed = fmt::format("{:.2f}x {}", s.speedup.value_or(0), s.by_cpu ? "cpu" : "wall");
    row.push_back(speed);
    row.push_back(s.estimated_gain_s ? Cell{*s.estimated_gain_s} : Cell{});
    row.push_back(s.measured_gain_s ? Cell{*s.measured_gain_s}
                                    : s.status == "ran" && s.name != "original" ? Cell{0.0} : Cell{});
    row.push_back(s.name == "original" || s.status != "ran" ? std::string("-")
                  : s.output_changed                         ? std::string("CHANGED")
                                                             : std::string("same"));
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string render_tune_text(const TuneResult& r) {
  std::string cmd;
  for (const std::string& w : r.command) cmd += (cmd.empty() ? "" : " ") + w;
  std::string out = fmt::format("sonde tune: {}\n{} run(s) per stage, interleaved with the original; "
                                "{} core(s); profiles in {}\n\n",
                                visible(cmd), r.repeat, r.cores, visible(r.output_dir));
  out += render_text(tune_table(r));
  out += fmt::format("\nTimes are seconds of the whole command, median of the runs (wall, and CPU: "
                     "user + system); the phase columns are the training loop's breakdown, or the "
                     "original's top routines by exclusive time. A stage that changes thread "
                     "counts is judged on wall time, any other on CPU time, which a loaded "
                     "machine moves far less. It is faster only when every run of it beat every "
                     "run of the original and the medians differ by more than {:.0f} %; otherwise "
                     "the difference is none (as it is under {:.0f} ms).\n",
                     kTuneMinEffect * 100, kTuneMinSeconds * 1000);
  for (const TuneStage& s : r.stages) {
    if (s.output_changed)
      out += fmt::format("{} changes the program's results: {}\n", s.name, visible(s.output_difference));
    if (s.estimated_gain_s && *s.estimated_gain_s > 0 && s.verdict != Verdict::kFaster && s.status == "ran")
      out += fmt::format("{}: the {} rule estimated {:.3f} s; the measurement refutes it\n", s.name,
                         s.rule, *s.estimated_gain_s);
    if (s.estimated_gain_s && s.measured_gain_s && s.verdict == Verdict::kFaster && s.status == "ran")
      out += fmt::format("{}: the {} rule estimated {:.3f} s, {:.3f} s measured: the measurement "
                         "{}\n", s.name, s.rule, *s.estimated_gain_s, *s.measured_gain_s,
                         *s.estimated_gain_s > 0.001 ? "confirms it" : "finds what it missed");
  }
  for (const std::string& n : r.notes) out += "note: " + visible(n) + "\n";
  return out;
}

Json render_tune_json(const TuneResult& r) {
  Json j;
  j["format_version"] = 1;
  j["command"] = r.command;
  j["repeat"] = r.repeat;
  j["cores"] = r.cores;
  j["output_dir"] = r.output_dir;
  j["min_effect"] = kTuneMinEffect;
  j["stages"] = Json::array();
  for (const TuneStage& s : r.stages) {
    Json e;
    e["name"] = s.name;
    e["knobs"] = Json::object();
    for (const Knob& k : s.knobs) e["knobs"][k.variable] = k.value;
    e["status"] = s.status;
    if (!s.reason.empty()) e["reason"] = s.reason;
    bool measured = !s.runs.empty() && s.median_s > 0;
    e["total_s"] = measured ? Json(s.median_s) : Json();
    e["min_s"] = measured ? Json(s.min_s) : Json();
    e["max_s"] = measured ? Json(s.max_s) : Json();
    e["cpu_s"] = measured ? Json(s.cpu_median_s) : Json();
    e["cpu_min_s"] = measured ? Json(s.cpu_min_s) : Json();
    e["cpu_max_s"] = measured ? Json(s.cpu_max_s) : Json();
    e["judged_on"] = s.by_cpu ? "cpu" : "wall";
    e["speedup"] = s.speedup ? Json(*s.speedup) : Json();
    e["verdict"] = s.name == "original" || s.status != "ran" ? Json()
                   : s.verdict == Verdict::kFaster           ? Json("faster")
                   : s.verdict == Verdict::kSlower           ? Json("slower")
                                                             : Json("none");
    e["phases"] = Json::object();
    for (const std::string& p : r.phase_names)
      if (auto it = s.phases.find(p); it != s.phases.end()) e["phases"][p] = it->second;
    e["output_changed"] = s.output_changed;
    if (s.output_changed) e["output_difference"] = s.output_difference;
    e["rule"] = s.rule.empty() ? Json() : Json(s.rule);
    e["estimated_gain_s"] = s.estimated_gain_s ? Json(*s.estimated_gain_s) : Json();
    e["measured_gain_s"] = s.measured_gain_s ? Json(*s.measured_gain_s) : Json();
    e["runs"] = Json::array();
    for (const TuneRun& run : s.runs) {
      Json x{{"wall_s", run.wall_s}, {"cpu_s", run.cpu_s}, {"ok", run.ok}, {"profile", run.profile}};
      if (!run.ok) x["ended"] = run.ended;
      e["runs"].push_back(x);
    }
    j["stages"].push_back(e);
  }
  j["notes"] = r.notes;
  return j;
}

}  // namespace sonde::analyzers
