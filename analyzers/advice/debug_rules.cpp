#include "advice/debug_rules.hpp"

#include <fmt/format.h>

#include "advice/rule_helpers.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

std::vector<Candidate> anomaly_mode(const AdviceInput& in, const Rule& rule) {
  const DebugTools& d = in.debug;
  std::int64_t ns = d.stack_ns + d.nan_check_ns;
  double pct = share(ns, in.metrics.share_base_ns());
  if (d.stacks <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "torch.autograd.set_detect_anomaly";
  c.evidence = {{"stack_records", d.stacks},  {"stack_s", seconds(d.stack_ns)},
                {"nan_checks", d.nan_checks}, {"nan_check_s", seconds(d.nan_check_ns)},
                {"time_s", seconds(ns)},      {"pct_run", pct}};
  c.summary = fmt::format(
      "autograd's anomaly mode is on: {} operator calls stored the Python stack of their call "
      "and {} backward checks looked for NaN, {:.1f} % of the busy threads' time outside "
      "set-up ({:.3f} s)",
      d.stacks, d.nan_checks, pct, seconds(ns));
  c.advice = std::string(rule.advice);
  // The records and checks are removed whole; the operators keep their own work.
  c.est_gain_s = seconds(ns);
  c.gain_bound =
      "the stack records' and NaN checks' own time, measured; what the mode adds inside each "
      "operator beside them (its metadata) comes on top";
  return {c};
}

std::vector<Candidate> torch_profiler(const AdviceInput& in, const Rule& rule) {
  const DebugTools& d = in.debug;
  double pct = share(d.profiler_ns, in.metrics.share_base_ns());
  if (d.profiler_ns <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = d.profiler_caller.empty() ? "torch.profiler" : d.profiler_caller;
  c.evidence = {{"profiler_s", seconds(d.profiler_ns)},
                {"profiler_calls", d.profiler_calls},
                {"pct_run", pct}};
  c.summary = fmt::format(
      "the PyTorch profiler's own Python (collecting and parsing its events) takes {:.1f} % of "
      "the busy threads' time outside set-up ({:.3f} s){}",
      pct, seconds(d.profiler_ns),
      d.profiler_caller.empty() ? "" : fmt::format(", under {}", d.profiler_caller));
  c.advice = std::string(rule.advice);
  c.est_gain_s = 0.9 * seconds(d.profiler_ns);
  c.gain_bound =
      "the profiler's own frames, measured; what it adds inside every operator it records "
      "(record_shapes, with_stack: a stack per operator) comes on top, unmeasured";
  return {c};
}

std::vector<Candidate> module_hooks(const AdviceInput& in, const Rule& rule) {
  const DebugTools& d = in.debug;
  std::int64_t ns = d.hook_ns + d.backward_hook_ns;
  double pct = share(ns, in.metrics.share_base_ns());
  if (d.hook_calls <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = d.hook.empty() ? "nn.Module hooks" : d.hook;
  c.evidence = {{"forward_hooks_s", seconds(d.hook_ns)},
                {"hook_calls", d.hook_calls},
                {"backward_hooks_s", seconds(d.backward_hook_ns)},
                {"time_s", seconds(ns)},
                {"pct_run", pct}};
  c.summary = fmt::format(
      "nn.Module hooks take {:.1f} % of the busy threads' time outside set-up ({:.3f} s): {} "
      "calls beside their modules' forward ({:.3f} s){}{}",
      pct, seconds(ns), d.hook_calls, seconds(d.hook_ns),
      d.backward_hook_ns > 0 ? fmt::format(" and the backward hooks' autograd nodes ({:.3f} s)",
                                           seconds(d.backward_hook_ns))
                             : std::string(),
      d.hook.empty() ? std::string() : fmt::format(", most in {}", d.hook));
  c.advice = std::string(rule.advice);
  c.est_gain_s = 0.9 * seconds(ns);
  c.gain_bound = "the hooks' own frames and nodes, measured: removed or run on fewer steps";
  return {c};
}

}  // namespace sonde::analyzers
