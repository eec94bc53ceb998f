#include "advice/operator_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "advice/op_loops.hpp"
#include "advice/rule_helpers.hpp"
#include "metrics/breakdown.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {

using namespace rules_detail;

namespace {

constexpr std::size_t kMaxCandidates = 3;
// Fewer iterations are no loop to judge per iteration (a warm-up, a short evaluation).
constexpr std::int64_t kMinIterations = 20;

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

std::string fuse_clause(const RunFacts& facts) {
  auto before_2 = torch_before_2(facts);
  return before_2 ? fmt::format(
                        "torch.compile, which fuses chains of such operators, needs PyTorch "
                        "2 (this run's torch is {})",
                        *before_2)
                  : std::string("torch.compile fuses chains of such operators into one pass");
}

// An operator's own work made cheaper or fused: half of it (all of it where it goes).
void half_its_own_time(const RoutineMetrics& r, Candidate& c) {
  c.est_gain_s = 0.5 * seconds(r.excl_ns);
  c.gain_bound = fmt::format(
      "at most the operator's own {:.3f} s (its work removed); half of it where it is only made "
      "cheaper or fused",
      seconds(r.excl_ns));
}

std::string generic_advice(const RunFacts& facts, std::string_view op) {
  std::string fuse = fuse_clause(facts);
  return fmt::format(
      "{} runs outside any BLAS or oneDNN call: an element-wise or reduction operator costs its "
      "passes over memory (sonde tree --callers '{}' shows where it is called from). Fewer or "
      "smaller ones: in-place forms, fused functions (F.scaled_dot_product_attention for "
      "attention's softmax and dropout in PyTorch 2), a smaller dtype (bfloat16 under "
      "torch.autocast), tensors made once and reused; {}",
      op, op, fuse);
}

// An operator of a few microseconds a call (a red-team collate's aten::select, 0.5 us over
// 1.7M calls) costs its dispatch, whatever it computes: a view makes no pass over memory at
// all, and no dtype or fused kernel makes a call cheaper. Fewer calls is the remedy.
std::string dispatch_advice(const RoutineMetrics& r, double us_per_call) {
  return fmt::format(
      "{} takes {:.2f} us a call over {} calls: the cost of calling it (Python, the dispatcher, "
      "autograd's bookkeeping), not of its work. Fewer calls: the loop making them (sonde tree "
      "--callers '{}' shows it) as operations over whole tensors, index tensors or masks "
      "instead of one element at a time",
      r.name, us_per_call, r.calls, r.name);
}

// The operators whose work is a GEMM or a convolution (and the layers built of them): PyTorch
// hands it to its BLAS or oneDNN, and that call, not the operator, is what the GEMM and
// convolution rules judge. Where such an operator keeps the time itself, no call sonde could
// intercept ran beneath it: PyTorch's pip wheels link MKL and oneDNN into libtorch_cpu.so,
// where LD_PRELOAD may not reach (Debian's links libblas.so.3 and libdnnl.so.2). The element-wise
// advice ("its passes over memory") was wrong for those.
// clang-format off
constexpr std::string_view kLibraryWorkOps[] = {
    "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
    "aten::linear", "aten::mv", "aten::addmv", "aten::einsum", "aten::tensordot",
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d",
    "aten::conv_transpose2d", "aten::conv_transpose3d", "aten::convolution",
    "aten::_convolution", "aten::convolution_backward", "aten::mkldnn_convolution",
    "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu",
    "aten::scaled_dot_product_attention"};
// clang-format on
// A GEMM or convolution operator whose library calls ran beneath it, keeping time of its own.
constexpr std::string_view kLibraryWorkBetweenAdvice =
    "{}'s products ran in the BLAS and oneDNN calls beneath it ({:.3f} s, which the GEMM and "
    "convolution rules judge); its own time is the work between them, element-wise and copies: "
    "a recurrent layer's gates and per-step slices, and under torch.autocast the casts of its "
    "weights and inputs to the lower dtype at every call, which can cost more than the "
    "products gain (time it with and without autocast). Fewer, larger calls (a larger batch, "
    "whole sequences per call) spread that work; {}";
constexpr std::string_view kOpaqueLibraryAdvice =
    "{} is GEMM or convolution work that ran in no BLAS or oneDNN call sonde could intercept{}: "
    "this PyTorch links its BLAS and oneDNN into libtorch_cpu.so (PyTorch's pip wheels link MKL "
    "and oneDNN so), where LD_PRELOAD does not reach, so its time is the operator's own{}. What "
    "sets its speed is the layer's shape (nn.Linear: batch x "
    "sequence, in_features, out_features; a convolution's channels and image size): a larger "
    "batch per step, wider layers, sizes a multiple of 16, the channels-last memory format for "
    "convolutions, and torch's intra-op pool as wide as the cores free for it "
    "(torch.set_num_threads)";

bool is_library_work(std::string_view op) {
  return std::find(std::begin(kLibraryWorkOps), std::end(kLibraryWorkOps), op) !=
         std::end(kLibraryWorkOps);
}

bool any_library_call(const Metrics& m) {
  return std::any_of(m.routines.begin(), m.routines.end(), [](const RoutineMetrics& r) {
    return (r.kind == kinds::kBlas || r.kind == kinds::kOnednn) && r.calls > 0;
  });
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
        "{} takes {:.1f} % of the busy threads' time outside set-up ({:.3f} s over {} calls, "
        "{:.3f} ms each) "
        "in its own work, outside any library call beneath it",
        r->name, pct, seconds(r->excl_ns), r->calls,
        r->calls > 0 ? seconds(r->excl_ns) * 1e3 / r->calls : 0.0);
    if (is_library_work(r->name) && r->blas_under_ns > 0) {
      // Its products were seen, beneath it: its own time is the rest. A red team's LSTM under
      // bfloat16 autocast (9,048 GEMM calls beneath aten::lstm, its own time 0.64 -> 1.46 s) was
      // told they ran where sonde could not see.
      c.evidence.emplace_back("library_under_s", seconds(r->blas_under_ns));
      c.advice = fmt::format(fmt::runtime(kLibraryWorkBetweenAdvice), r->name,
                             seconds(r->blas_under_ns), fuse_clause(m.facts));
      half_its_own_time(*r, c);
      out.push_back(std::move(c));
      continue;
    }
    if (is_library_work(r->name)) {
      bool none = !any_library_call(m);
      c.evidence.emplace_back("library_calls_in_run", std::string(none ? "none" : "some"));
      // Its FLOPs from the shapes recorded with --record-shapes (operator_flops.hpp), where the
      // run has them: the GFLOP/s its library call would have given.
      auto f = in.operator_flops.find(r->routine_id);
      std::string rate;
      if (auto gflops = f != in.operator_flops.end() ? f->second.gflops() : std::nullopt) {
        c.evidence.emplace_back("gflops_from_shapes", *gflops);
        c.evidence.emplace_back("calls_with_flops", f->second.calls);
        rate = fmt::format(
            "; its recorded shapes give {:.2f} GFLOP/s over {} of its calls (sonde shapes "
            "--operators, per input signature)",
            *gflops, f->second.calls);
      } else {
        rate =
            " and no GFLOP/s is known. Its input shapes per call site and their GFLOP/s: run "
            "again with --record-shapes, then sonde shapes --operators";
      }
      c.advice = fmt::format(fmt::runtime(kOpaqueLibraryAdvice), r->name,
                             none ? " (nor did any other operator of the run)" : "", rate);
      // Without its FLOPs nothing bounds what a better shape would gain; with them, the peak of
      // the library that ran them (MKL's, in its own threads) is still unknown.
      c.est_gain_s = 0;
      c.gain_bound = rate.starts_with(";")
                         ? "none: its GFLOP/s is known from its shapes, not the peak of the "
                           "library that ran it unseen"
                         : "none: the work's FLOPs are not known where its BLAS or oneDNN call "
                           "is not seen";
      out.push_back(std::move(c));
      continue;
    }
    bool dropout =
        std::find(std::begin(kDropoutOps), std::end(kDropoutOps), r->name) != std::end(kDropoutOps);
    double us_per_call = r->calls > 0 ? 1e6 * seconds(r->excl_ns) / r->calls : 0.0;
    bool cell = r->name == "aten::lstm_cell" || r->name == "aten::gru_cell" ||
                r->name == "aten::rnn_tanh_cell" || r->name == "aten::rnn_relu_cell";
    if (dropout)
      c.advice = fill(kDropoutAdvice, r->name);
    else if (cell)  // a red-team LSTMCell loop was advised bfloat16 and fused attention
      c.advice = fmt::format(
          "{} is a recurrent cell stepped from Python, {} calls of {:.1f} us: nn.LSTM, nn.GRU or "
          "nn.RNN over the whole sequence runs the steps in one fused call (sonde tree --callers "
          "'{}' shows the loop stepping it)",
          r->name, r->calls, us_per_call, r->name);
    else if (us_per_call * 1e3 <= kSmallCallNs)
      c.advice = dispatch_advice(*r, us_per_call);
    else
      c.advice = generic_advice(m.facts, r->name);
    if (dropout) {
      // Dropout taken out takes its backward with it: the gradient's multiply by the mask, a
      // MulBackward0 that sonde cannot tell from the model's other multiplies. A red-team
      // Transformer LM was estimated 0.602 s (half its dropouts' own 1.204 s) and gained
      // 1.4-1.7 s of CPU time with dropout=0.
      c.est_gain_s = seconds(r->excl_ns);
      c.gain_bound = fmt::format(
          "the operator's own {:.3f} s where the model drops it, and more: its backward's "
          "multiply by the mask goes too, which is not told apart from the model's other "
          "multiplies (MulBackward0)",
          seconds(r->excl_ns));
    } else {
      half_its_own_time(*r, c);
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Candidate> small_operators(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  const Breakdown& b = in.breakdown;
  // On a GPU the same cost is the launches', which gpu-launches judges.
  if (in.gpu.any() || !b.found || b.gpu || b.iterations < kMinIterations || b.loop_flops <= 0)
    return {};
  // Every call of a torch operator or autograd node in the iterations, nested ones too (each
  // pays the dispatcher).
  std::int64_t op_calls = 0;
  for (const RoutineMetrics& r : m.routines)
    if (r.kind == kinds::kTorch)
      if (auto it = b.loop_calls.find(r.routine_id); it != b.loop_calls.end())
        op_calls += it->second;
  if (op_calls <= 0) return {};
  // The fastest the run's counted arithmetic went: its best GEMM shape, or a oneDNN call.
  double best_gflops = 0;
  for (const ShapeMetrics& s : m.shapes)
    if (s.time_ns > 0) best_gflops = std::max(best_gflops, s.flops / double(s.time_ns));
  for (const RoutineMetrics& r : m.routines)
    if ((r.kind == kinds::kBlas || r.kind == kinds::kOnednn) && r.flops > 0 && r.incl_ns > 0)
      best_gflops = std::max(best_gflops, r.flops / double(r.incl_ns));
  if (best_gflops <= 0) return {};
  // The iterations' time less their data loading, which grows with the samples, not the steps.
  std::int64_t loop_ns = b.other_ns;
  for (const BreakdownRow& row : b.rows)
    if (row.id != "t_io") loop_ns += row.time_ns;
  if (loop_ns <= 0) return {};
  double per_op_ns = double(loop_ns) / double(op_calls);
  double arithmetic_ns = b.loop_flops / best_gflops;
  double fixed_ns = double(loop_ns) - arithmetic_ns;
  if (per_op_ns >= kSmallCallNs || arithmetic_ns >= 0.25 * double(loop_ns)) return {};
  auto fixed = std::llround(fixed_ns);
  double pct = share(fixed, m.share_base_ns());
  if (pct < rule.threshold) return {};
  double iters = double(b.iterations);
  // The most called GEMM's smallest side: for nn.Linear, the batch x sequence (or a layer's
  // width), told so that the reader finds the batch in it.
  const ShapeMetrics* common = nullptr;
  for (const ShapeMetrics& s : m.shapes)
    if (common == nullptr || s.calls > common->calls) common = &s;
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = b.body.empty() ? b.loop : b.body;
  c.evidence = {{"iterations", b.iterations},
                {"operators_per_iteration", double(op_calls) / iters},
                {"us_per_operator", per_op_ns / 1e3},
                {"iteration_us", double(loop_ns) / iters / 1e3},
                {"arithmetic_us", arithmetic_ns / iters / 1e3},
                {"mflop_per_iteration", b.loop_flops / iters / 1e6},
                {"best_gflops", best_gflops},
                {"fixed_s", seconds(fixed)},
                {"pct_run", pct}};
  std::string side;
  if (common != nullptr) {
    std::int64_t smallest = std::min({common->m, common->n, common->k});
    c.evidence.emplace_back("gemm_smallest_side", smallest);
    side = fmt::format(
        "; its most called GEMM ({} {}x{}x{}) has {} on its smallest side, for an nn.Linear the "
        "batch x sequence or a layer's width",
        common->routine, common->m, common->n, common->k, smallest);
  }
  c.summary = fmt::format(
      "the training loop's {} iterations spend {:.1f} % of the busy threads' time outside "
      "set-up ({:.3f} s) calling operators rather than computing: {:.0f} operators an "
      "iteration of {:.1f} us each, their counted arithmetic {:.0f} us of each {:.0f} us "
      "iteration at the run's best rate",
      b.iterations, pct, seconds(fixed), double(op_calls) / iters, per_op_ns / 1e3,
      arithmetic_ns / iters / 1e3, double(loop_ns) / iters / 1e3);
  auto before_2 = torch_before_2(m.facts);
  c.advice = fmt::format(
      "each iteration pays for every operator and layer it calls (Python, the dispatcher, "
      "autograd's bookkeeping, nn.Module's and the optimizer's Python) whatever its batch, and "
      "its {:.2f} MFLOP would take {:.0f} us at {:.1f} GFLOP/s{}. Where the data holds more "
      "samples than a batch, a larger batch per step runs them in fewer iterations, each "
      "costing about as much (scale the learning rate with it and check the accuracy; "
      "gradient accumulation keeps the iterations and their cost); fewer, fused operators cut "
      "it too: {}",
      b.loop_flops / iters / 1e6, arithmetic_ns / iters / 1e3, best_gflops, side,
      before_2 ? fmt::format("torch.jit.script of the model (torch.compile needs PyTorch 2; "
                             "this run's torch is {})",
                             *before_2)
               : std::string("torch.compile of the model"));
  c.est_gain_s = 0.5 * seconds(fixed);
  c.gain_bound = fmt::format(
      "half the iterations' time outside their counted arithmetic and data loading ({:.3f} s): "
      "a batch twice as large runs the same samples in half the iterations. The arithmetic is "
      "taken at the run's best rate ({:.1f} GFLOP/s), which small shapes do not reach, and "
      "element-wise work grows with the batch too: an upper bound",
      seconds(fixed), best_gflops);
  return {c};
}

namespace {
// The lookups and their dense backward, as torch.profiler names them (1.13 and 2.x).
constexpr std::string_view kEmbeddingForward[] = {"aten::embedding", "aten::embedding_bag",
                                                  "aten::_embedding_bag"};
constexpr std::string_view kEmbeddingBackward[] = {
    "aten::embedding_backward", "aten::embedding_dense_backward", "aten::_embedding_bag_backward",
    "aten::_embedding_bag_dense_backward"};
// The backward this many times the lookups: a gradient of far more rows than are looked up.
constexpr double kDenseRatio = 10.0;

template <std::size_t N>
std::int64_t time_of(const Metrics& m, const std::string_view (&names)[N], std::int64_t* calls) {
  std::int64_t ns = 0;
  for (const RoutineMetrics& r : m.routines)
    if (r.kind == kinds::kTorch && std::find(names, names + N, r.name) != names + N) {
      ns += r.incl_ns;
      if (calls != nullptr) *calls += r.calls;
    }
  return ns;
}
}  // namespace

std::vector<Candidate> embedding_dense_grad(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  if (in.gpu.any()) return {};
  std::int64_t backward_calls = 0;
  std::int64_t forward_ns = time_of(m, kEmbeddingForward, nullptr);
  std::int64_t backward_ns = time_of(m, kEmbeddingBackward, &backward_calls);
  double pct = share(backward_ns, m.share_base_ns());
  if (backward_ns <= 0 || backward_calls <= 0 || pct < rule.threshold) return {};
  double ratio = forward_ns > 0 ? double(backward_ns) / double(forward_ns) : 0;
  if (forward_ns > 0 && ratio < kDenseRatio) return {};
  std::int64_t update_ns = 0;
  for (const BreakdownRow& row : in.breakdown.rows)
    if (row.id == "t_u") update_ns = row.time_ns;
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "nn.Embedding";
  c.evidence = {{"backward_s", seconds(backward_ns)}, {"backward_calls", backward_calls},
                {"lookup_s", seconds(forward_ns)},    {"backward_over_lookup", ratio},
                {"update_s", seconds(update_ns)},     {"pct_run", pct}};
  c.summary = fmt::format(
      "the embeddings' dense backward takes {:.1f} % of the busy threads' time outside set-up "
      "({:.3f} s over {} calls, {:.1f} ms each){}: each builds a gradient of the whole table",
      pct, seconds(backward_ns), backward_calls,
      1e3 * seconds(backward_ns) / double(backward_calls),
      forward_ns > 0
          ? fmt::format(", {:.0f} times their lookups' {:.3f} s", ratio, seconds(forward_ns))
          : std::string());
  c.advice = std::string(rule.advice);
  c.est_gain_s = 0.9 * seconds(backward_ns) + 0.5 * seconds(update_ns);
  c.gain_bound = fmt::format(
      "0.9 x the dense backward ({:.3f} s), and half the update's {:.3f} s: the share of it "
      "that is the table's is not known without the parameters' sizes (python -m sonde "
      "--record-shapes names the tensors an operator took); a table far larger than the rest "
      "of the model is most of it",
      seconds(backward_ns), seconds(update_ns));
  return {c};
}

}  // namespace sonde::analyzers
