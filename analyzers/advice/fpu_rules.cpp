#include "advice/fpu_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "advice/rule_helpers.hpp"
#include "profile/line_costs.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

namespace {

// The time FTZ/DAZ gives back from `time_s` of work in which a share `f` of the elements is
// subnormal and each costs `penalty` times a normal one: T f (p - 1) / (1 - f + f p). A share
// not measured counts as 1: the bound, T (1 - 1/p).
double subnormal_gain_s(double time_s, std::optional<double> share, double penalty) {
  double f = std::clamp(share.value_or(1.0), 0.0, 1.0), p = std::max(penalty, 1.0);
  return time_s * f * (p - 1) / (1 - f + f * p);
}

// The Python hook's run_info python.subnormal:ROUTINE = "SHARE FLAGGED SAMPLED".
std::optional<double> python_subnormal_share(const RunFacts& facts, const std::string& routine) {
  auto it = facts.info.find("python.subnormal:" + routine);
  if (it == facts.info.end()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(it->second.c_str(), &end);
  return end == it->second.c_str() ? std::nullopt : std::optional(v);
}

}  // namespace

std::vector<Candidate> subnormals(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  if (m.facts.fpu_ftz != "0" || m.facts.fpu_daz != "0") return {};
  std::vector<const Note*> evidence;
  for (const auto& n : in.notes)
    if (n.topic == "denormals") evidence.push_back(&n);
  if (evidence.empty()) return {};  // FTZ off alone is not a problem
  // Each named routine's time, with the share of subnormal elements its sampled calls saw.
  std::int64_t affected_ns = 0;
  double gain_s = 0, weighted_share = 0, best_gain_s = 0;
  bool shares_known = true;
  std::vector<std::string> affected;
  for (const auto& r : m.routines) {
    std::string fn = function_part(r.name);
    // The Python hook's routines are named by their run_info keys, exactly (its note's text
    // would match a routine "train" in "train.py:291(...)"); others by the notes' words.
    std::optional<double> share = python_subnormal_share(m.facts, r.name);
    bool named =
        share.has_value() || std::any_of(evidence.begin(), evidence.end(), [&](const Note* n) {
          if (n->message.find("python.subnormal:") != std::string::npos) return false;
          return contains_word(n->message, r.name) ||
                 (r.kind == kinds::kPython && contains_word(n->message, fn));
        });
    if (!named) continue;
    shares_known = shares_known && share.has_value();
    affected_ns += r.incl_ns;
    weighted_share += share.value_or(1.0) * seconds(r.incl_ns);
    double g = subnormal_gain_s(seconds(r.incl_ns), share, rule.threshold);
    gain_s += g;
    // The routine with the most to gain leads (the location and its note).
    if (affected.empty() || g > best_gain_s) {
      best_gain_s = g;
      affected.insert(affected.begin(), r.name);
    } else {
      affected.push_back(r.name);
    }
  }
  std::string basis = "named routines";
  auto sampled = info_number(m.facts, "blas.subnormal.sampled_calls");
  auto flagged = info_number(m.facts, "blas.subnormal.flagged_calls");
  auto values = info_number(m.facts, "blas.subnormal.values");
  auto sampled_values = info_number(m.facts, "blas.subnormal.sampled_values");
  auto products = info_number(m.facts, "blas.subnormal.product_calls");
  std::optional<double> share;
  if (affected.empty() && products && *products > 0 && sampled && *sampled > 0) {
    // Calls whose every product is subnormal (their operands' magnitudes say so): the penalty
    // is on the whole call, their share of the sampled calls of the GEMM time.
    for (const auto& r : m.routines)
      if ((r.kind == kinds::kBlas || r.kind == kinds::kOnednn) && r.flops > 0)
        affected_ns += r.incl_ns;
    affected_ns = static_cast<std::int64_t>(static_cast<double>(affected_ns) *
                                            std::min(1.0, *products / *sampled));
    basis = "BLAS/oneDNN calls x calls with subnormal products/sampled calls";
    gain_s = subnormal_gain_s(seconds(affected_ns), std::nullopt, rule.threshold);
  } else if (affected.empty()) {
    // Subnormal operands are sampled at GEMM calls: the GEMM time, with the share of the
    // sampled operand elements that were subnormal, else scaled by the flagged calls' share.
    affected_ns = 0;
    for (const auto& r : m.routines)
      if ((r.kind == kinds::kBlas || r.kind == kinds::kOnednn) && r.flops > 0)
        affected_ns += r.incl_ns;
    basis = "BLAS/oneDNN calls";
    if (values && sampled_values && *sampled_values > 0) {
      share = *values / *sampled_values;
      basis = "BLAS/oneDNN calls x subnormal share of the sampled operands";
    } else if (sampled && flagged && *sampled > 0) {
      affected_ns =
          static_cast<std::int64_t>(static_cast<double>(affected_ns) * *flagged / *sampled);
      basis = "BLAS/oneDNN calls x flagged/sampled calls";
    }
    gain_s = subnormal_gain_s(seconds(affected_ns), share, rule.threshold);
    // A vector FMA with one subnormal lane takes a microcode assist, ~100 times its cost: the
    // element share understates a GEMM's loss (a red-team Sinkhorn, 1.6 % of the sampled
    // elements subnormal: estimated 0.06 s, its GEMMs 4x slower and 1.23 s given back by
    // flushing them). Where the calls' distance from their attainable rate says more, it is
    // the estimate: what FTZ could give back at most.
    double headroom_s = 0;
    for (const auto& r : m.routines) {
      if ((r.kind != kinds::kBlas && r.kind != kinds::kOnednn) || r.flops <= 0) continue;
      auto limit = r.perf.attainable_gflops ? r.perf.attainable_gflops : r.perf.peak_gflops;
      if (r.perf.gflops && limit && *limit > 0)
        headroom_s += seconds(r.incl_ns) * std::max(0.0, 1.0 - *r.perf.gflops / *limit);
    }
    if (sampled && flagged && *sampled > 0) headroom_s *= std::min(1.0, *flagged / *sampled);
    if (headroom_s > gain_s) {
      gain_s = headroom_s;
      basis += "; the calls' distance from their attainable GFLOP/s";
    }
  } else if (shares_known && affected_ns > 0) {
    share = weighted_share / seconds(affected_ns);
    basis = "named routines x subnormal share of their sampled arguments";
  }
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = affected.empty() ? "run" : affected.front();
  c.evidence = {{"fpu_ftz", 0},
                {"fpu_daz", 0},
                {"notes", static_cast<std::int64_t>(evidence.size())},
                {"affected_time_s", seconds(affected_ns)},
                {"affected", basis},
                {"note", evidence.front()->message}};
  if (share) c.evidence.emplace_back("subnormal_share", *share);
  c.evidence.emplace_back("penalty", rule.threshold);
  if (sampled) c.evidence.emplace_back("sampled_calls", *sampled);
  if (flagged) c.evidence.emplace_back("flagged_calls", *flagged);
  if (values) c.evidence.emplace_back("subnormal_values", *values);
  if (products && *products > 0) c.evidence.emplace_back("product_calls", *products);
  // The note about the candidate's own routine, where one names it.
  const Note* said = evidence.front();
  for (const Note* n : evidence)
    if (!affected.empty() && n->message.find(affected.front()) != std::string::npos) said = n;
  c.summary = fmt::format("subnormal values seen with FTZ and DAZ off: {}", said->message);
  c.advice = std::string(rule.advice);
  c.est_gain_s = gain_s;
  c.gain_bound = fmt::format(
      "at most the affected {:.3f} s; no calibrated limit applies to the "
      "subnormal penalty (sonde tune's ftz stage measures it)",
      seconds(affected_ns));
  return {c};
}

}  // namespace sonde::analyzers
