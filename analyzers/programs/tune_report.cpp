// sonde tune's verdicts (the noise rule of metrics/noise.hpp) and its table.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "advice/tune_results.hpp"
#include "process/redact.hpp"
#include "programs/tune.hpp"

namespace sonde::analyzers {

bool tune_too_few_runs(std::size_t original_runs, std::size_t stage_runs) {
  return too_few_runs(original_runs, stage_runs);
}

namespace {
std::size_t original_runs(const TuneResult& r) {
  for (const TuneStage& s : r.stages)
    if (s.name == "original") return s.runs.size();
  return 0;
}
}  // namespace

Verdict tune_verdict(const std::vector<double>& original, const std::vector<double>& stage) {
  if (judge_noise(original, stage, kTuneMinSeconds) != Noise::kBeyond) return Verdict::kNone;
  return spread_of(stage).median < spread_of(original).median ? Verdict::kFaster : Verdict::kSlower;
}

Table tune_table(const TuneResult& r) {
  std::size_t original_runs = 0;
  for (const TuneStage& s : r.stages)
    if (s.name == "original") original_runs = s.runs.size();
  Table t;
  t.columns = {{"stage", "stage", 0}, {"knobs", "knobs", 0}};
  for (const std::string& p : r.phase_names) t.columns.push_back({p + " s", p, 3});
  t.columns.insert(t.columns.end(), {{"total s", "total_s", 3},
                                     {"min-max s", "range", 0},
                                     {"cpu s", "cpu_s", 3},
                                     {"cpu min-max s", "cpu_range", 0},
                                     {"speedup", "speedup", 0},
                                     {"est. gain s", "estimated_gain_s", 3},
                                     {"measured gain s", "measured_gain_s", 3},
                                     {"output", "output", 0}});
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
    if (s.status != "ran")
      speed = s.status + ": " + s.reason;
    else if (s.name == "original")
      speed = "1.00x";
    else if (s.verdict == Verdict::kNone)
      speed = fmt::format("none ({:.2f}x {}, {})", s.speedup.value_or(0), s.by_cpu ? "cpu" : "wall",
                          tune_too_few_runs(original_runs, s.runs.size())
                              ? "too few runs to tell: --repeat 3 or more"
                              : "in the noise");
    else
      speed = fmt::format("{:.2f}x {}", s.speedup.value_or(0), s.by_cpu ? "cpu" : "wall");
    row.push_back(speed);
    row.push_back(s.estimated_gain_s ? Cell{*s.estimated_gain_s} : Cell{});
    row.push_back(s.measured_gain_s                           ? Cell{*s.measured_gain_s}
                  : s.status == "ran" && s.name != "original" ? Cell{0.0}
                                                              : Cell{});
    row.push_back(s.name == "original" || s.status != "ran" || !s.output
                      ? std::string("-")
                      : output_summary(*s.output));
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string render_tune_text(const TuneResult& r) {
  // The command as a profile keeps it: tune's report and its JSON are files too.
  std::string cmd = redact_arguments(r.command, true);
  std::string out = fmt::format(
      "sonde tune: {}\n{} run(s) per stage, interleaved with the original; "
      "{} core(s); profiles in {}\n\n",
      visible(cmd), r.repeat, r.cores, visible(r.output_dir));
  out += render_text(tune_table(r));
  out += fmt::format(
      "\nTimes are seconds of the whole command, median of the runs (wall, and CPU: the "
      "busy threads', or user + system where the profile lacks it); the phase columns are the "
      "training loop's breakdown, or the "
      "original's top routines by exclusive time. A stage that changes thread "
      "counts is judged on wall time, any other on CPU time, which a loaded "
      "machine moves far less. It is faster only when every run of it beat every "
      "run of the original and the medians differ by more than {:.0f} %; otherwise "
      "the difference is none (as it is under {:.0f} ms).\n",
      kTuneMinEffect * 100, kTuneMinSeconds * 1000);
  OutputTolerance tol;
  out += fmt::format(
      "Output: every number the program printed on stdout against the same one of "
      "the original's (line by line), equal within rel {} or abs {} (rel alone for a "
      "stage that sets SONDE_FTZ, which changes exactly the tiny numbers); a "
      "stage differs when a run of it matches no original run. Left out: "
      "timings (a time unit or rate after the number, a time word before it, a "
      "table column named so), clock times, dates, pids and addresses.\n",
      tolerance_text(tol.rel), tolerance_text(tol.abs));
  for (const TuneStage& s : r.stages) {
    if (s.output_changed)
      out += fmt::format("{} changes the program's results: {}\n", s.name,
                         visible(s.output_difference));
    if (!s.side_effects.empty()) {
      std::string all;
      for (const std::string& e : s.side_effects) all += (all.empty() ? "" : "; ") + e;
      out += fmt::format(
          "{} also changed what its knobs are not for, as its runs recorded it (the "
          "original's in brackets): {}: its timings are those changes' too{}\n",
          s.name, visible(all),
          s.name == "pinning" ? " (OMP_PROC_BIND binds the first thread, and every thread and "
                                "process it starts, to the first place)"
                              : "");
    }
    if (!s.estimated_gain_s || s.status != "ran") continue;
    bool faster = s.verdict == Verdict::kFaster;
    double measured = s.measured_gain_s.value_or(0);
    bool few = tune_too_few_runs(original_runs(r), s.runs.size());
    std::string verdict =
        measured_verdict(faster, *s.estimated_gain_s, measured, s.smallest_gain_s, few);
    if (!faster && verdict == "refuted")
      out += fmt::format("{}: the {} rule estimated {:.3f} s; the measurement refutes it\n", s.name,
                         s.rule, *s.estimated_gain_s);
    if (!faster && verdict == "unmeasured" && few)
      out += fmt::format(
          "{}: the {} rule estimated {:.3f} s; too few runs to tell (--repeat 3 or more): "
          "neither confirmed nor refuted\n",
          s.name, s.rule, *s.estimated_gain_s);
    else if (!faster && verdict == "unmeasured")
      out += fmt::format(
          "{}: the {} rule estimated {:.3f} s, under the {:.3f} s a stage must gain here to be "
          "told from the original: neither confirmed nor refuted\n",
          s.name, s.rule, *s.estimated_gain_s, s.smallest_gain_s);
    if (faster)
      out +=
          fmt::format("{}: the {} rule estimated {:.3f} s, {:.3f} s measured: the measurement {}\n",
                      s.name, s.rule, *s.estimated_gain_s, measured,
                      verdict == "confirmed" ? "confirms it" : "finds it " + verdict);
  }
  for (const std::string& n : r.notes) out += "note: " + visible(n) + "\n";
  return out;
}

Json render_tune_json(const TuneResult& r) {
  Json j;
  j["format_version"] = 1;
  j["command"] = redact_words(r.command);
  j["repeat"] = r.repeat;
  j["cores"] = r.cores;
  j["output_dir"] = r.output_dir;
  j["min_effect"] = kTuneMinEffect;
  OutputTolerance tol;
  j["output_tolerance"] = {{"rel", tol.rel}, {"abs", tol.abs}};
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
    e["smallest_gain_s"] = s.smallest_gain_s > 0 ? Json(s.smallest_gain_s) : Json();
    e["verdict"] = s.name == "original" || s.status != "ran" ? Json()
                   : s.verdict == Verdict::kFaster           ? Json("faster")
                   : s.verdict == Verdict::kSlower           ? Json("slower")
                                                             : Json("none");
    e["phases"] = Json::object();
    for (const std::string& p : r.phase_names)
      if (auto it = s.phases.find(p); it != s.phases.end()) e["phases"][p] = it->second;
    e["side_effects"] = s.side_effects;
    e["output_changed"] = s.output_changed;
    if (s.output_changed) e["output_difference"] = s.output_difference;
    if (s.output) {
      const OutputComparison& c = *s.output;
      e["output"] = {{"verdict", c.differs() ? "differs"
                                 : c.exact() ? "same"
                                             : "same within tolerance"},
                     {"summary", output_summary(c)},
                     {"tolerance", {{"rel", c.tolerance.rel}, {"abs", c.tolerance.abs}}},
                     {"detail", output_detail(c)},
                     {"numbers_compared", c.compared},
                     {"numbers_beyond", c.beyond},
                     {"numbers_left_out", c.left_out},
                     {"lines_with_other_words", c.word_lines},
                     {"lines", c.lines_after},
                     {"original_lines", c.lines_before},
                     {"largest_relative_difference",
                      std::isfinite(c.largest_rel) ? Json(c.largest_rel) : Json()}};
    } else {
      e["output"] = Json();
    }
    e["rule"] = s.rule.empty() ? Json() : Json(s.rule);
    e["estimated_gain_s"] = s.estimated_gain_s ? Json(*s.estimated_gain_s) : Json();
    e["measured_gain_s"] = s.measured_gain_s ? Json(*s.measured_gain_s) : Json();
    e["runs"] = Json::array();
    for (const TuneRun& run : s.runs) {
      Json x{
          {"wall_s", run.wall_s}, {"cpu_s", run.cpu_s}, {"ok", run.ok}, {"profile", run.profile}};
      if (!run.ok) x["ended"] = run.ended;
      e["runs"].push_back(x);
    }
    j["stages"].push_back(e);
  }
  j["notes"] = r.notes;
  return j;
}

}  // namespace sonde::analyzers
