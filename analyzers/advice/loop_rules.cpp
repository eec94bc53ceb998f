#include "advice/loop_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string>

#include "advice/rule_helpers.hpp"
#include "profile/line_costs.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

namespace {

constexpr std::size_t kMaxCandidates = 3;
// A loop, not a function's few calls: 10,000 small calls in the run, and one of them made at
// least kMinPerCall times (op_loops.hpp) per call of the function (a model's forward makes each
// of its operators' calls 1-3 times a call; a red-team masked loss 4,820 selects a call).
constexpr std::int64_t kMinSmallCalls = 10'000;
// Written over whole tensors, the same arithmetic runs in a few calls: two red-team loops
// (a masked sequence loss, a k-NN's per-pair distances) kept 3-5 % of their time.
constexpr double kKept = 0.1;
// A recurrence stepped from Python, or a stack of small layers, keeps its arithmetic and more:
// a red-team GRUCell loop gained 37 % in nn.GRU, a 64-layer ModuleList 46 % under
// torch.jit.script, against 90 % estimated as any loop.
constexpr double kKeptSequential = 0.6;

// The form of a loop's remedy.
enum class LoopKind { kVectorise, kRecurrent, kLayers };
LoopKind kind_of(const OpLoop& l) {
  if (l.recurrent) return LoopKind::kRecurrent;
  if (3 * l.module_calls >= l.small_calls) return LoopKind::kLayers;
  return LoopKind::kVectorise;
}

// What --lines takes for the function: its name, or, for a module's top level or a
// comprehension, its whole routine name ('<module>' alone times every module's).
std::string lines_pattern(const std::string& site) {
  std::string fn = function_part(site);
  return fn.starts_with("<") ? site : fn;
}

std::string compiled_clause(const AdviceInput& in) {
  auto before_2 = torch_before_2(in.metrics.facts);
  return before_2 ? fmt::format(
                        "torch.jit.script (torch.compile needs PyTorch 2; this run's torch is "
                        "{})",
                        *before_2)
                  : std::string("torch.compile");
}

std::string calls_of(const OpLoop& l) {
  std::string out;
  for (const auto& [name, calls] : l.top)
    out += fmt::format("{}{} x{}", out.empty() ? "" : ", ", name, calls);
  return out;
}

std::string torch_advice(const AdviceInput& in, const OpLoop& l, const std::string& lines) {
  switch (kind_of(l)) {
    case LoopKind::kRecurrent:
      return fmt::format(
          "the loop in {} steps a recurrent cell from Python, one call per time step, each "
          "needing the last: no rewrite over whole tensors removes the steps. A fused layer runs "
          "them in one call (nn.LSTM, nn.GRU, nn.RNN over the whole sequence instead of their "
          "Cell stepped), or {} of the loop; several independent sequences stepped together as "
          "one batch. python -m sonde --lines '{}' times its lines; check that the results stay "
          "the same",
          l.site, compiled_clause(in), lines);
    case LoopKind::kLayers:
      return fmt::format(
          "{} calls many small nn.Modules one after another (a ModuleList, a stack of small "
          "layers): each layer's call costs more than its work. {} of the model fuses them and "
          "drops the calls' cost; fewer, wider layers, or a larger batch per call, make each "
          "call's work worth its cost. python -m sonde --lines '{}' times its lines",
          l.site, compiled_clause(in), lines);
    case LoopKind::kVectorise:
      break;
  }
  // Gradient clipping per parameter (a red team's, 38 % of its loop): one call takes them all,
  // but clips by one norm over every gradient, which is another rule than each one's own.
  std::string clipping;
  for (const auto& [name, calls] : l.top)
    if (name.find("(clip_grad_norm_)") != std::string::npos ||
        name.find("(clip_grad_value_)") != std::string::npos)
      clipping =
          ". torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm) clips every gradient "
          "in one call, by their one norm together: where that is the rule meant (it is the "
          "usual one), that call; each gradient by its own norm stays per tensor (foreach "
          "kernels in PyTorch 2)";
  return fmt::format(
      "write the loop in {} as operations over whole tensors: its calls cost their dispatch and "
      "the interpreter's loop, not their arithmetic. Pick elements with index tensors or masks "
      "(x[mask], torch.gather, index_select) instead of one index expression each; reduce over "
      "a dimension in one call (sum(dim=...), F.cross_entropy(..., reduction=...) over the "
      "masked elements); broadcast instead of looping over rows{}. Where each step needs the "
      "last (a recurrence, an environment stepped), a fused layer (nn.RNN, nn.GRU, nn.LSTM), "
      "{} of the loop, or many independent sequences or environments stepped together as one "
      "batch. python -m sonde --lines '{}' times its lines; check that the results stay the "
      "same{}",
      l.site, l.backward_ns > 0 ? "; its backward then shrinks with it" : "", compiled_clause(in),
      lines, clipping);
}

std::string numpy_advice(const OpLoop& l, const std::string& lines) {
  // Its small calls hold BLAS products from `@`: a stack of them is one product (the red
  // team's 3x3 rotations, 0.329 -> 0.016 s as one matmul over the stack).
  std::string products =
      l.blas ? "Small matrix products one at a time (R[i] @ P[i], x[i] @ W) are one np.matmul "
               "over the stacked arrays, which broadcasts over the leading axes (R @ P[..., "
               "None] for a stack of matrix-vector products, X @ W for the rows together). "
             : "";
  return fmt::format(
      "write the loop in {} as operations over whole arrays: its calls cost numpy's dispatch "
      "and the interpreter's loop, not their arithmetic. {}One call over an axis (np.sum(x, "
      "axis=1), x.mean(0)) instead of one per row; broadcasting (a[:, None, :] - b[None, :, :]) "
      "or a matrix product for pairwise differences and distances (|a|^2 - 2 a.b + |b|^2); "
      "boolean masks and np.where instead of branches per element (np.vectorize is still a "
      "loop). Where each step needs the last (time stepping, a simulation, an environment), "
      "the steps stay: plain Python floats for a few scalars (numpy's calls cost more than "
      "their arithmetic on them), numba, or many independent runs stepped together as one "
      "array. python -m sonde --lines '{}' times its lines; check that the results stay the "
      "same",
      l.site, products, lines);
}

std::string operators_of(const OpLoop& l) {
  constexpr std::size_t kMost = 24;
  std::string out;
  std::size_t n = 0;
  for (const std::string& op : l.operators) {
    if (n++ == kMost) break;
    out += (out.empty() ? "" : ", ") + op;
  }
  return out;
}

}  // namespace

std::vector<Candidate> python_loop(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  std::vector<Candidate> out;
  for (const OpLoop& l : in.op_loops) {
    if (out.size() == kMaxCandidates) break;
    if (l.step || l.small_calls < kMinSmallCalls || l.max_per_call < kMinPerCall) continue;
    std::int64_t loop_ns = l.own_ns + l.small_ns;
    double pct = share(loop_ns, m.share_base_ns());
    if (pct < rule.threshold) continue;
    double us = l.small_calls > 0 ? 1e6 * seconds(l.small_ns) / l.small_calls : 0;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = l.site;
    c.routine_id = l.routine_id;
    c.evidence = {{"site_calls", l.site_calls},
                  {"small_calls", l.small_calls},
                  {"small_s", seconds(l.small_ns)},
                  {"us_per_call", us},
                  {"small_bound_us", 1e-3 * static_cast<double>(l.small_bound_ns)},
                  {"most_per_site_call", l.max_per_call},
                  {"own_s", seconds(l.own_ns)},
                  {"pct_run", pct},
                  {"calls_of", calls_of(l)}};
    if (!l.caller.empty()) c.evidence.emplace_back("caller", l.caller);
    std::string backward;
    if (l.backward_ns > 0) {
      c.evidence.emplace_back("backward_s", seconds(l.backward_ns));
      c.evidence.emplace_back("backward_nodes", l.backward_calls);
      backward = fmt::format(
          "; the backward pass repeats them: {} autograd nodes of those operators, {:.3f} s",
          l.backward_calls, seconds(l.backward_ns));
    }
    if (l.steps > 0) {
      c.evidence.emplace_back("training_steps", l.steps);
      c.summary = fmt::format(
          "{} runs a loop inside each of its {} training steps: {} calls of a few microseconds "
          "each ({:.1f} us on average; up to {:.0f} per step): {:.3f} s, {:.1f} % of the busy "
          "threads' time outside set-up (the loop's own interpretation left out, the training "
          "loop's with it){}",
          l.site, l.steps, l.small_calls, us, l.max_per_call, seconds(l.small_ns), pct, backward);
    } else {
      c.summary = fmt::format(
          "{} makes {} calls of a few microseconds each ({:.1f} us on average; up to {:.0f} per "
          "call of its own, {} calls of it): {:.3f} s, with {:.3f} s of its own running the "
          "loop, {:.1f} % of the busy threads' time outside set-up{}",
          l.site, l.small_calls, us, l.max_per_call, l.site_calls, seconds(l.small_ns),
          seconds(l.own_ns), pct, backward);
    }
    if (!l.operators.empty()) c.evidence.emplace_back("operators", operators_of(l));
    LoopKind kind = kind_of(l);
    c.evidence.emplace_back("loop", std::string(kind == LoopKind::kRecurrent ? "recurrent cell"
                                                : kind == LoopKind::kLayers  ? "module calls"
                                                                             : "small calls"));
    std::string lines = lines_pattern(l.site);
    c.advice = l.torch || !l.numpy ? torch_advice(in, l, lines) : numpy_advice(l, lines);
    double time_s = seconds(loop_ns + l.backward_ns);
    c.est_gain_s = (1 - (kind == LoopKind::kVectorise ? kKept : kKeptSequential)) * time_s;
    c.gain_bound = fmt::format(
        "at most the loop's time, {:.3f} s (its own {:.3f} s, its small calls' {:.3f} s{}): "
        "{}; its own time counts whole, other work of the function with it, and the times are "
        "as profiled, the calls' cost under sonde with them",
        time_s, seconds(l.own_ns), seconds(l.small_ns),
        l.backward_ns > 0 ? fmt::format(", their backward's {:.3f} s", seconds(l.backward_ns))
                          : std::string(),
        kind == LoopKind::kVectorise
            ? "written over whole tensors or arrays the same arithmetic runs in a few calls"
            : fmt::format("a fused layer or a compiler keeps the steps' arithmetic, {:.1f} of "
                          "the time gained",
                          1 - kKeptSequential));
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Candidate> batch_matrix_vector(const AdviceInput& in, const Rule& rule) {
  constexpr std::int64_t kMinCalls = 1'000;
  constexpr double kGain = 0.8;
  const Metrics& m = in.metrics;
  std::vector<Candidate> out;
  for (const MatrixVectorSite& s : in.matrix_vector) {
    if (out.size() == kMaxCandidates) break;
    double pct = share(s.ns, m.share_base_ns());
    if (s.calls < kMinCalls || pct < rule.threshold) continue;
    // A library's own GEMVs, made by a LAPACK routine sonde does not intercept beneath
    // numpy.linalg or scipy (np.linalg.lstsq's 21,200 dgemv_ were told to be stacked): no
    // vectors of the program's to stack.
    if (s.caller_file.find("/numpy/") != std::string::npos ||
        s.caller_file.find("/scipy/") != std::string::npos)
      continue;
    auto r = std::find_if(m.routines.begin(), m.routines.end(),
                          [&](const RoutineMetrics& x) { return x.routine_id == s.routine_id; });
    double mb_per_call = r != m.routines.end() && r->calls > 0 ? r->bytes / r->calls / 1e6 : 0.0;
    double gflops = s.ns > 0 ? s.flops / static_cast<double>(s.ns) : 0.0;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = s.routine;
    c.routine_id = s.routine_id;
    c.evidence = {{"caller", s.caller},
                  {"calls", s.calls},
                  {"calls_per_caller_call",
                   s.caller_calls > 0 ? static_cast<double>(s.calls) / s.caller_calls : 0.0},
                  {"time_s", seconds(s.ns)},
                  {"pct_run", pct},
                  {"gflops", gflops},
                  {"mb_per_call", mb_per_call}};
    c.summary = fmt::format(
        "{} is called {} times from {} ({:.3f} s, {:.1f} % of the busy threads' time outside "
        "set-up): one "
        "vector a call, each reading its matrix ({:.2f} MB a call on average) at {:.2f} GFLOP/s",
        s.routine, s.calls, s.caller, seconds(s.ns), pct, mb_per_call, gflops);
    c.advice = fmt::format(
        "where the vectors {} takes do not depend on each other's results (requests, samples, "
        "the columns of a batch), stack them into one matrix and make one product per matrix "
        "(numpy: X @ W over all the rows at once; torch: a batch dimension, or torch.bmm): a "
        "matrix product reads the matrix once for all of them and runs at the GEMM's speed, not "
        "the memory's. A recurrence (each vector the last one's result: an RNN step, power "
        "iteration, conjugate gradients) cannot be batched so; there the matrix in a smaller "
        "dtype, or several independent problems stepped together, are what is left",
        s.caller);
    std::optional<double> peak = r != m.routines.end() ? r->perf.peak_gflops : std::nullopt;
    if (peak && *peak > 0) {
      double floor_s = s.flops / *peak / 1e9;
      c.est_gain_s = kGain * std::max(0.0, seconds(s.ns) - floor_s);
      bound_gain(c, seconds(s.ns), floor_s,
                 fmt::format("their {:.3g} GFLOP at the {} GEMM peak ({:.1f} GFLOP/s)",
                             s.flops / 1e9, m.facts.peak_word("gemm." + r->dtype), *peak));
    } else {
      c.est_gain_s = 0.5 * seconds(s.ns);
      c.gain_bound = "half their time: no GEMM peak is calibrated (sonde calibrate) to bound it";
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace sonde::analyzers
