#include "advice/operator_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "advice/rule_helpers.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

namespace {

constexpr std::size_t kMaxCandidates = 3;

// Dropout draws a random number for every element of its input: on the CPU its cost is that
// draw, where its tensors are largest. The red-team Transformer's dropouts took 8.6 ms a call,
// 61 % of it in the feed-forward block's, the rest on the attention weights; with dropout=0
// its run took 8.4 s, not 16.6.
constexpr std::string_view kDropoutOps[] = {"aten::dropout", "aten::native_dropout",
                                            "aten::bernoulli_", "aten::feature_dropout",
                                            "aten::alpha_dropout"};
constexpr std::string_view kDropoutAdvice =
    "dropout draws a random number for every element of its input, so it costs most where its "
    "tensors are largest: a Transformer's feed-forward activations (batch x sequence x "
    "dim_feedforward) and attention weights (batch x heads x sequence^2), both set by "
    "nn.TransformerEncoderLayer's dropout= (sonde tree --callers '{}' shows which call sites "
    "hold it). Where the model allows: dropout on fewer of them, or none (many models train "
    "without)";

std::string generic_advice(const RunFacts& facts, std::string_view op) {
  auto before_2 = torch_before_2(facts);
  std::string fuse =
      before_2 ? fmt::format(
                     "torch.compile, which fuses chains of such operators, needs PyTorch "
                     "2 (this run's torch is {})",
                     *before_2)
               : std::string("torch.compile fuses chains of such operators into one pass");
  return fmt::format(
      "{} runs outside any BLAS or oneDNN call: an element-wise or reduction operator costs its "
      "passes over memory (sonde tree --callers '{}' shows where it is called from). Fewer or "
      "smaller ones: in-place forms, fused functions (F.scaled_dot_product_attention for "
      "attention's softmax and dropout in PyTorch 2), a smaller dtype (bfloat16 under "
      "torch.autocast), tensors made once and reused; {}",
      op, op, fuse);
}

}  // namespace

std::vector<Candidate> torch_operator(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  // On a GPU an operator's own host time is its launches and the host's waits for the device,
  // not its work: gpu-launches and gpu-sync judge those, gpu-kernel the work. Left to them.
  if (in.gpu.any()) return {};
  std::vector<const RoutineMetrics*> ops;
  for (const RoutineMetrics& r : m.routines)
    if (r.kind == kinds::kTorch && r.name.starts_with("aten::") &&
        share(r.excl_ns, m.share_base_ns()) >= rule.threshold)
      ops.push_back(&r);
  std::sort(ops.begin(), ops.end(), [](const RoutineMetrics* a, const RoutineMetrics* b) {
    return a->excl_ns > b->excl_ns;
  });
  std::vector<Candidate> out;
  for (const RoutineMetrics* r : ops) {
    if (out.size() == kMaxCandidates) break;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = r->name;
    c.routine_id = r->routine_id;
    double pct = share(r->excl_ns, m.share_base_ns());
    c.evidence = {{"own_time_s", seconds(r->excl_ns)},
                  {"pct_run", pct},
                  {"calls", r->calls},
                  {"ms_per_call", r->calls > 0 ? seconds(r->excl_ns) * 1e3 / r->calls : 0.0}};
    c.summary = fmt::format(
        "{} takes {:.1f} % of the busy threads' time ({:.3f} s over {} calls, {:.3f} ms each) "
        "in its own work, outside any library call beneath it",
        r->name, pct, seconds(r->excl_ns), r->calls,
        r->calls > 0 ? seconds(r->excl_ns) * 1e3 / r->calls : 0.0);
    bool dropout =
        std::find(std::begin(kDropoutOps), std::end(kDropoutOps), r->name) != std::end(kDropoutOps);
    c.advice = dropout ? fill(kDropoutAdvice, r->name) : generic_advice(m.facts, r->name);
    c.est_gain_s = 0.5 * seconds(r->excl_ns);
    c.gain_bound = fmt::format(
        "at most the operator's own {:.3f} s (its work removed); half of it where it is only "
        "made cheaper or fused",
        seconds(r->excl_ns));
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace sonde::analyzers
