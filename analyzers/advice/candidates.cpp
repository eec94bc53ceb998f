#include "advice/candidates.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "advice/blas_rules.hpp"
#include "advice/debug_rules.hpp"
#include "advice/dtype_rules.hpp"
#include "advice/fpu_rules.hpp"
#include "advice/gpu_rules.hpp"
#include "advice/loop_rules.hpp"
#include "advice/operator_rules.hpp"
#include "advice/optimizer_work.hpp"
#include "advice/rank_rules.hpp"
#include "advice/rule_helpers.hpp"
#include "advice/thread_rules.hpp"
#include "metrics/breakdown.hpp"
#include "profile/call_tree.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

using namespace rules_detail;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

const LineFunction* lines_of(const AdviceInput& in, const std::string& routine) {
  for (const auto& f : in.lines.functions)
    if (f.name == routine) return &f;
  return nullptr;
}

// ---- optimizer-update -------------------------------------------------------------------

// The update's advice in the language it is written in. The rule's own text is numpy's (the
// reference Python workload); torch's per-parameter loops (torch.optim's _single_tensor_adam,
// _single_tensor_sgd, ...) have a multi-tensor path, and a region of a program without Python
// frames is C or C++, whose loop is the compiler's to vectorise.
constexpr std::string_view kTorchUpdateAdvice =
    "use torch.optim's multi-tensor path instead of the per-parameter loop in {}: pass "
    "foreach=True to the optimizer (fused=True where it has one, on CUDA), or torch.compile the "
    "training step (PyTorch 2): one kernel per operation for all parameters instead of one per "
    "parameter tensor";
constexpr std::string_view kNativeUpdateAdvice =
    "vectorise and fuse the update loop in {}: build with -O3 -march=native and check that the "
    "loop vectorises (-fopt-info-vec-missed), mark the arrays __restrict, fuse the update's "
    "loops into one pass over each parameter, and spread it over the cores with OpenMP "
    "(#pragma omp parallel for simd)";

// torch.optim picks its multi-tensor (foreach) and fused paths by default only for tensors on
// the devices that have those kernels (CUDA; torch/optim/optimizer.py's
// _default_to_fused_or_foreach): on the CPU its per-parameter loop is the default for a reason.
// Told to pass foreach=True there, a red-team run (torch 1.13, Adam over 13 layers) made its
// update 1.4-4x slower; one already on _multi_tensor_adam was told to pass it again.
// And a red-team tiny transformer (many small parameters, batch 4) made its update 14-25 %
// faster with it: on the CPU foreach pays where the per-tensor overhead is the cost, and not
// where each tensor is large. Measure both ways.
constexpr std::string_view kTorchCpuUpdateAdvice =
    "the update's per-parameter loop in {} runs on the CPU, where PyTorch leaves torch.optim's "
    "multi-tensor path (foreach=True) off by default: it pays where the parameters are many "
    "small tensors (a small transformer's update: 14-25 % faster here) and costs where they are "
    "few large ones (Adam over 13 large layers: 1.4-4x slower here), so time both; {}, or update "
    "fewer, larger parameter tensors";
constexpr std::string_view kTorchMultiTensorAdvice =
    "the update in {{}} is already torch.optim's multi-tensor path (foreach): pass fused=True "
    "where the optimizer has one (Adam, AdamW, SGD), or {}, for one kernel per step instead of "
    "one per operation";
// The same on the CPU, where PyTorch leaves foreach off by default: a red-team run that passed
// foreach=True (40 small blocks, Adam) was told to leave it unset, 0.11 s slower, or to
// torch.compile on torch 1.13. Measure both ways, as the per-parameter loop's advice says.
constexpr std::string_view kTorchCpuMultiTensorAdvice =
    "the update in {{}} already runs torch.optim's multi-tensor path (foreach=True) on the CPU, "
    "where PyTorch leaves it off by default: it pays where the parameters are many small "
    "tensors and costs where they are few large ones, so time it with foreach=False too; {}, or "
    "update fewer, larger parameter tensors";

// A torch.optim.Optimizer subclass of the program's own (a Lion, a LAMB): its step's loop over
// the parameters is the program's to write, with torch's tools.
constexpr std::string_view kTorchOwnStepAdvice =
    "the step of this optimizer of the program's own ({{}}) runs its operations one parameter "
    "tensor at a time, each making temporaries: write them in place (mul_, add_, addcmul_, "
    "lerp_) and over each parameter group at once with the torch._foreach_* operations, as "
    "torch.optim's foreach paths do (that pays most where the parameters are many small "
    "tensors: time both), or {}";

// A step or update of the program's own that already runs torch._foreach_* over its parameter
// lists: told to write it so (a red-team foreach Lion, 0.11-0.15 s against the loop's 0.23-0.27).
constexpr std::string_view kTorchForeachAlreadyAdvice =
    "the update in {{}} already runs torch._foreach_* operations over whole parameter lists: "
    "what is left is their passes over memory, one per operation; fuse them (fewer operations, "
    "in place: addcmul_, lerp_), or {}";

// An update of the program's own (a method named update: an EMA of the weights, a hand-written
// SGD) in a run of torch operators: told numpy's in-place ufuncs and numexpr, a red-team
// timm-style ModelEma.update gained 1.14 s of 1.32 with lerp_ instead.
constexpr std::string_view kTorchNamedUpdateAdvice =
    "the update in {{}} runs torch operations one tensor at a time, each making temporaries: "
    "write them in place (mul_, add_, and lerp_ for a moving average such as an EMA of the "
    "weights) and over all the tensors at once with the torch._foreach_* operations, or {}";
// The same already in place (an EMA's mul_ and add_ per tensor): what is left is the loop and
// the passes. A red-team EMA over 26 small tensors: 125 us a call, 84 with _foreach_mul_ and
// _foreach_add_, 66 with one lerp_ per tensor (torch 1.13, no profiler).
constexpr std::string_view kTorchInPlaceUpdateAdvice =
    "the update in {{}} runs in-place torch operations one tensor at a time: run them over all "
    "the tensors at once with the torch._foreach_* operations (torch._foreach_mul_, "
    "_foreach_add_), and make one pass of two where one operation does both (lerp_ for a "
    "moving average such as an EMA of the weights), or {}";

// torch.optim's zero_grad (its record_function region "Optimizer.zero_grad#SGD.zero_grad",
// or the frame): a red-team run's, 0.72 s over 150 steps of aten::zero_ on every gradient, was
// told numpy's in-place ufuncs; set_to_none=True saved about 0.4 s of it (backward then
// writes each gradient fresh instead of adding into zeros).
constexpr std::string_view kZeroGradAdvice =
    "{{}} zeroes every gradient in place before each backward, one pass over each: "
    "zero_grad(set_to_none=True) sets them to None instead (the default from PyTorch 2.0), and "
    "backward writes each fresh rather than adding into zeros{}";

// torch.optim's zero_grad, in a run of torch operators (elsewhere a region of that name is
// the program's own).
bool torch_zero_grad(const Metrics& m, const RoutineMetrics& r) {
  std::string_view name = r.name;
  bool named = r.kind == kinds::kRegion ? name.starts_with("Optimizer.zero_grad")
                                        : r.kind == kinds::kPython && name.ends_with("(zero_grad)");
  return named && ran_torch(m);
}

// torch.compile where the run's torch has it (PyTorch 2: run_info torch.version); a red-team
// run on torch 1.13 was told to use it.
std::string compile_clause(const Metrics& m) {
  if (auto version = torch_before_2(m.facts))
    return fmt::format(
        "torch.compile, which fuses its element-wise passes, needs PyTorch 2 (this "
        "run's torch is {})",
        *version);
  return "torch.compile the optimizer step (PyTorch 2) to fuse its element-wise passes into one "
         "loop per parameter";
}

std::string update_advice(const AdviceInput& in, const RoutineMetrics& r, const Rule& rule,
                          const OptimizerWork& w) {
  const Metrics& m = in.metrics;
  if (torch_zero_grad(m, r)) {
    auto before_2 = torch_before_2(m.facts);
    return fmt::format(fmt::runtime(kZeroGradAdvice),
                       before_2
                           ? fmt::format(" (this run's torch is {}, where it is False)", *before_2)
                           : std::string("; where the program passes set_to_none=False, "
                                         "or zeroes the gradients itself, that is the "
                                         "pass"));
  }
  if (w.foreach && r.kind == kinds::kPython && !function_part(r.name).starts_with("_multi_tensor_"))
    return fmt::format(fmt::runtime(kTorchForeachAlreadyAdvice), compile_clause(m));
  if (w.torch_step) return fmt::format(fmt::runtime(kTorchOwnStepAdvice), compile_clause(m));
  std::string fn = r.kind == kinds::kPython ? function_part(r.name) : r.name;
  if (r.kind == kinds::kPython && fn.starts_with("_multi_tensor_"))
    return fmt::format(
        fmt::runtime(in.gpu.any() ? kTorchMultiTensorAdvice : kTorchCpuMultiTensorAdvice),
        compile_clause(m));
  if (r.kind == kinds::kPython && fn.starts_with("_single_tensor_"))  // the run used CUDA?
    return in.gpu.any() ? std::string(kTorchUpdateAdvice)
                        : fmt::format(fmt::runtime(kTorchCpuUpdateAdvice), "{}", compile_clause(m));
  bool python = std::any_of(m.routines.begin(), m.routines.end(),
                            [](const RoutineMetrics& x) { return x.kind == kinds::kPython; });
  if (r.kind != kinds::kPython && !python) return std::string(kNativeUpdateAdvice);
  if (r.kind == kinds::kPython && ran_torch(m))
    return fmt::format(
        fmt::runtime(w.op_calls > 0 && w.out_of_place_calls == 0 ? kTorchInPlaceUpdateAdvice
                                                                 : kTorchNamedUpdateAdvice),
        compile_clause(m));
  return std::string(rule.advice);
}

// What the advice saved of the update's work where it was tried. A numpy update fused in place
// (the Chainer poster's case): most of it, 0.8. torch.optim's per-parameter loop on the CPU,
// told to time foreach: 14-28 % (a red-team Adam over 13 layers estimated 1.804 s, gained
// 0.55-0.64), 0.3. An optimizer's own per-tensor step written with foreach: 45-55 % (a Lion,
// 0.21-0.29 s to 0.10-0.17), 0.5; one on foreach already, what fusing or compiling leaves:
// unmeasured here, 0.3.
double update_gain_share(const AdviceInput& in, const RoutineMetrics& r, const OptimizerWork& w) {
  if (torch_zero_grad(in.metrics, r)) return 0.5;  // the red team's: 0.4 s of 0.72
  if (r.kind != kinds::kPython || !ran_torch(in.metrics)) return 0.8;
  if (w.foreach) return 0.3;
  if (function_part(r.name).starts_with("_single_tensor_") && !in.gpu.any()) return 0.3;
  if (w.torch_step) return 0.5;
  return 0.8;
}

std::vector<Candidate> optimizer_update(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  std::vector<Candidate> out;
  for (const RoutineMetrics* r : phases(m)) {
    // The update's own work. Where optimizer-like phases run beneath it (Chainer's
    // Optimizer.update(lossfun) -> Variable.update() -> update_core_cpu()), the other phases it
    // calls (the loss's forward, backward) are not the update: its work is its time less
    // theirs, and the gain is bounded by that, never by the caller's inclusive time.
    OptimizerWork w;
    if (auto it = in.optimizer_work.find(r->name); it != in.optimizer_work.end()) w = it->second;
    if (!(w.torch_step || looks_like_optimizer(r->name)) ||
        in.breakdown.not_updates.count(r->routine_id))
      continue;
    if (w.inner_ns <= 0) w.other_ns = w.other_blas_ns = 0;
    std::int64_t work_ns = r->incl_ns - w.other_ns;
    std::int64_t blas_ns = r->blas_under_ns - w.other_blas_ns;
    if (share(work_ns, m.share_base_ns()) < rule.threshold) continue;
    // Low efficiency: the phase is not a GEMM in disguise (little time in FLOP-counted calls).
    if (work_ns <= 0 || 4 * blas_ns >= work_ns) continue;
    // An update() that spends most of its work in update_core_cpu() is reported once, as the
    // inner, more specific function: a hit with half or more of its work in optimizer-like
    // phases called beneath it is left out.
    if (2 * w.inner_ns >= work_ns) continue;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = r->name;
    c.routine_id = r->routine_id;
    std::string fn = r->kind == kinds::kPython ? function_part(r->name) : r->name;
    double gflops = r->gflops_under.value_or(0.0), blas_pct = share(blas_ns, work_ns);
    c.evidence = {{"time_s", seconds(work_ns)}, {"pct_run", share(work_ns, m.share_base_ns())},
                  {"calls", r->calls},          {"blas_time_s", seconds(blas_ns)},
                  {"blas_pct", blas_pct},       {"gflops", gflops}};
    c.summary = fmt::format(
        "{} takes {:.1f} % of the busy threads' time outside set-up ({:.3f} s over {} calls), "
        "{:.1f} % of "
        "it in FLOP-counted BLAS ({:.3f} GFLOP/s)",
        fn, share(work_ns, m.share_base_ns()), seconds(work_ns), r->calls, blas_pct, gflops);
    if (w.other_ns > 0) {
      c.evidence.emplace_back("incl_s", seconds(r->incl_ns));
      c.evidence.emplace_back("other_work_s", seconds(w.other_ns));
      c.summary += fmt::format(
          ", not counting the {:.3f} s of other work it calls (phases "
          "beneath it with no update in them: forward, backward)",
          seconds(w.other_ns));
    }
    // "step" or "update" alone names no optimizer: where torch's advice is given, the frame.
    std::string where = w.torch_step || (r->kind == kinds::kPython && ran_torch(m)) ? r->name : fn;
    if (const LineFunction* f = lines_of(in, r->name)) {
      std::vector<const LineRow*> rows;
      for (const auto& l : f->lines)
        if (l.recorded) rows.push_back(&l);
      std::stable_sort(rows.begin(), rows.end(),
                       [](const LineRow* a, const LineRow* b) { return a->time_ns > b->time_ns; });
      std::vector<std::string> named;
      for (std::size_t i = 0; i < rows.size() && i < 2; ++i) {
        const LineRow& l = *rows[i];
        std::string p = i == 0 ? "hottest_line" : "second_line";
        c.evidence.emplace_back(p, l.line);
        c.evidence.emplace_back(p + "_pct", l.pct);
        std::string text = l.contents;
        text.erase(0, text.find_first_not_of(" \t"));
        if (!text.empty()) c.evidence.emplace_back(p + "_text", text);
        named.push_back(
            fmt::format("line {} ({:.1f} %{})", l.line, l.pct, text.empty() ? "" : ": " + text));
      }
      if (!named.empty()) {
        c.summary += "; hottest: " + named[0];
        if (named.size() > 1) c.summary += ", then " + named[1];
        where += fmt::format(" (line {} first)", rows[0]->line);
      }
    }
    c.advice = fill(update_advice(in, *r, rule, w), where);
    c.est_gain_s = update_gain_share(in, *r, w) * seconds(work_ns - blas_ns);
    // An element-wise phase moving N bytes cannot beat N / mem.bw. A region whose program
    // declared what one entry moves (sonde_region_bytes: run_info region.bytes:NAME) moves
    // that. Where the Python hook measured the float arrays a function is called with
    // (python.arg_bytes:NAME, the mean over its sampled calls), it must at least read them
    // once: N is that, per call. Else sonde does not see the bytes an update's own loops move,
    // and the bound is said as the traffic under which the estimate holds.
    auto cores = m.facts.available_cores();
    auto bw = m.facts.peak_at("mem.bw", cores);
    // The bytes per call where known: the evidence's name for them, and how they are known.
    auto fact = [&](const std::string& key) {
      auto it = m.facts.info.find(key);
      return it == m.facts.info.end() ? 0.0 : std::atof(it->second.c_str());
    };
    double per_call = r->kind == kinds::kRegion ? fact("region.bytes:" + r->name) : 0.0;
    const char* key = "region_bytes_per_call";
    const char* how = "moving the {:.3g} MB per call the program declared (sonde_region_bytes; ";
    if (per_call <= 0) {
      per_call = fact("python.arg_bytes:" + r->name);
      key = "arg_bytes_per_call";
      how =
          "reading its float array arguments once ({:.3g} MB per call, measured on sampled "
          "calls; ";
    }
    if (bw && per_call > 0) {
      double bytes = per_call * static_cast<double>(r->calls);
      c.evidence.emplace_back("mem_bw_gbs", *bw);
      c.evidence.emplace_back(key, per_call);
      bound_gain(c, seconds(work_ns), bytes / (*bw * 1e9),
                 fmt::format(fmt::runtime(how), per_call / 1e6) +
                     fmt::format("{:.3g} GB over {} calls) at the {} mem.bw ({:.3g} "
                                 "GB/s, {} threads)",
                                 bytes / 1e9, r->calls, m.facts.peak_word("mem.bw"), *bw, *cores));
    } else if (bw) {
      double left_s = seconds(work_ns) - c.est_gain_s;
      double max_bytes = left_s * *bw * 1e9;
      c.evidence.emplace_back("mem_bw_gbs", *bw);
      c.evidence.emplace_back("max_bytes_for_gain", max_bytes);
      c.gain_bound = fmt::format(
          "an element-wise phase moving N bytes takes at least N / mem.bw ({:.3g} GB/s, "
          "{}, {} threads): the estimate holds if {} moves at most {:.3g} MB per call "
          "({:.3g} GB in all; Adam reads and writes about 28 bytes per float32 parameter), and "
          "shrinks to time - N / mem.bw beyond",
          *bw, m.facts.peak_word("mem.bw"), *cores, fn,
          max_bytes / 1e6 / static_cast<double>(std::max<std::int64_t>(r->calls, 1)),
          max_bytes / 1e9);
    } else {
      c.gain_bound = fmt::format(
          "at most the update's own {:.3f} s; no tighter limit: no calibrated memory bandwidth "
          "(mem.bw) for this machine (sonde calibrate), and the bytes the phase moves are not "
          "measured",
          seconds(work_ns));
    }
    out.push_back(std::move(c));
  }
  return out;
}

// ---- gemm-shape -------------------------------------------------------------------------

// Batching same-shape products needs them independent: the steps of a recurrence (an RNN cell,
// a loop over time steps) each need the previous step's output. sonde cannot see data flow, so
// it reads the call site's name, and otherwise says the condition. By words, so that
// `lstm_cell`, `RNNCell.forward` and `time_step` match and `cancellation` or `miscellaneous`
// (which hold "cell") do not.
std::vector<std::string> name_words(std::string_view name) {
  std::vector<std::string> words;
  std::string word;
  auto end_word = [&] {
    if (!word.empty()) words.push_back(lower(word));
    word.clear();
  };
  for (size_t i = 0; i < name.size(); ++i) {
    char ch = name[i];
    if (!std::isalpha(static_cast<unsigned char>(ch))) {
      end_word();
      continue;
    }
    // A capital after a small letter, or a capital before a small one after capitals
    // (RNNCell: RNN, Cell), begins a word.
    bool upper = std::isupper(static_cast<unsigned char>(ch));
    bool after_lower = !word.empty() && std::islower(static_cast<unsigned char>(word.back()));
    bool before_lower =
        i + 1 < name.size() && std::islower(static_cast<unsigned char>(name[i + 1]));
    if (upper && (after_lower || (!word.empty() && before_lower))) end_word();
    word += ch;
  }
  end_word();
  return words;
}

bool looks_like_recurrence(std::string_view call_site) {
  std::vector<std::string> words = name_words(call_site);
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    auto ends_with = [&](std::string_view s) {
      return w.size() >= s.size() && w.compare(w.size() - s.size(), s.size(), s) == 0;
    };
    // birnn, convlstm, mygru: a recurrent layer's name ends so.
    if (ends_with("rnn") || ends_with("lstm") || ends_with("gru")) return true;
    if (w == "cell" || w == "cells" || w == "timestep" || w == "timesteps" ||
        w.rfind("recur", 0) == 0)
      return true;
    if (w == "time" && i + 1 < words.size() && (words[i + 1] == "step" || words[i + 1] == "steps"))
      return true;
  }
  return false;
}

constexpr std::string_view kRecurrenceAdvice =
    "these products come from {}, named like a recurrence, where each step needs the previous "
    "step's output: they cannot be batched across steps. Batch what does not depend on the "
    "previous step: the input projection of every time step as one GEMM (the whole sequence "
    "times W) before the loop, leaving one hidden-state product per step, or use a fused "
    "recurrent layer (torch.nn.LSTM/GRU, cuDNN or oneDNN RNN)";
// The same in a run of PyTorch's own recurrent layers (aten::lstm, aten::gru, ...): its CPU
// layer computes the whole sequence's input projection as one GEMM before the steps already
// (aten/src/ATen/native/RNN.cpp, FullLayer), so telling the user to do that, or to use
// torch.nn.LSTM, which they do, was wrong (a red-team find).
constexpr std::string_view kTorchRecurrenceAdvice =
    "these products come from {}, PyTorch's own recurrent layer ({}), which already computes "
    "the whole sequence's input projection as one GEMM; each step's hidden-state product needs "
    "the previous step's output and cannot be batched across steps. Wider products: a larger "
    "batch (more columns in every step's product), a larger hidden size in fewer layers; fewer "
    "of them: shorter sequences (truncated backpropagation through time); on a GPU, cuDNN's "
    "fused RNN, which PyTorch takes for CUDA tensors by default";
constexpr std::string_view kTorchRecurrentOps[] = {"aten::lstm", "aten::gru", "aten::rnn_tanh",
                                                   "aten::rnn_relu"};

// The first of PyTorch's recurrent layers' operators the run called, or "".
std::string torch_recurrent_layer(const Metrics& m) {
  for (const RoutineMetrics& r : m.routines)
    if (r.kind == kinds::kTorch &&
        std::find(std::begin(kTorchRecurrentOps), std::end(kTorchRecurrentOps), r.name) !=
            std::end(kTorchRecurrentOps))
      return r.name;
  return "";
}

// A convolution's shape is its implicit GEMM (oneDNN's and cuDNN's: m = batch x output pixels,
// n = output channels, k = input channels x kernel area): a thin side is the layer's own
// channel count, which batching or reordering products cannot change.
constexpr std::string_view kConvolutionAdvice =
    "this is a convolution, shown as its implicit GEMM (m = batch x output pixels, n = output "
    "channels, k = input channels x kernel area): its thin side is the layer's channel count. "
    "In PyTorch: the channels-last memory format (model.to(memory_format=torch.channels_last) "
    "and the inputs too), a larger batch per step, torch's intra-op pool as wide as the cores free "
    "for it "
    "(torch.set_num_threads), and on a GPU torch.backends.cudnn.benchmark = True; wider layers "
    "(channels a multiple of 16) where the model allows";
// A product inside PyTorch's own layers (nn.Linear's forward, an autograd node of one, attention
// in torch.nn.functional) has the shape the model's sizes give it: "batch into larger GEMMs,
// reorder dimensions, pick a layout" named nothing an nn.Linear user can change (a red-team
// find on a Trainer-style MLP and a Transformer LM). Its m and n are the column-major BLAS's,
// which PyTorch's row-major Y = X W^T computes as Y^T = W X^T: m = out_features (the advice had
// them the other way round, a red-team find).
constexpr std::string_view kTorchLayerAdvice =
    "these products come from {}, inside PyTorch's own layers, whose GEMM shapes the model's "
    "sizes set (nn.Linear: batch x sequence, k = in_features and out_features, where PyTorch "
    "calls the column-major sgemm_ or dgemm_ with its operands swapped, so m = out_features and "
    "n = batch x sequence; attention: the sequence lengths and the head dimension, "
    "embed_dim / num_heads): a larger batch per "
    "step, wider layers or fewer, wider heads, sizes a multiple of 16, where the model allows";

// An autograd node (AddmmBackward0, MmBackward1).
bool is_autograd_node(std::string_view site) {
  return site.ends_with("Backward0") || site.ends_with("Backward1");
}

bool is_torch_layer_site(std::string_view site, const Metrics& m) {
  if (!ran_torch(m)) return false;
  // An autograd node, an operator (aten::addmm), or a frame of torch.nn.
  return is_autograd_node(site) || site.starts_with("aten::") || site.starts_with("linear.py:") ||
         site.starts_with("functional.py:") || site.starts_with("activation.py:") ||
         site.starts_with("transformer.py:");
}

constexpr std::string_view kIfIndependent =
    " (batching applies if the products are independent of each other: the steps of a "
    "recurrence, each needing the previous step's output, cannot be batched)";

std::vector<Candidate> gemm_shape(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  constexpr double kMinShare = 1.0;  // % of the run a shape must take to be worth a look
  constexpr double kPeakPct = 10.0;  // below this % of peak is "far below peak"
  std::map<std::pair<std::int64_t, std::string>, double> best;  // routine_id, dtype
  for (const auto& s : m.shapes)
    if (s.perf.gflops && share(s.time_ns, m.share_base_ns()) >= kMinShare) {
      double& b = best[{s.routine_id, s.dtype}];
      b = std::max(b, *s.perf.gflops);
    }
  // The sizes of the products named like a recurrence, sorted: an autograd node's product of
  // the same sizes is their backward pass (dA = dC B^T, dB = A^T dC: the forward's m, n, k in
  // another order). Told as nn.Linear's, an LSTM's backward products were (a red-team find).
  auto sizes = [](const auto& s) {
    std::array<std::int64_t, 3> d{s.m, s.n, s.k};
    std::sort(d.begin(), d.end());
    return d;
  };
  std::set<std::array<std::int64_t, 3>> recurrent;
  for (const auto& s : m.shapes)
    if (looks_like_recurrence(s.call_site)) recurrent.insert(sizes(s));
  std::vector<Candidate> out;
  for (const auto& s : m.shapes) {
    if (!s.perf.gflops || share(s.time_ns, m.share_base_ns()) < kMinShare) continue;
    double g = *s.perf.gflops;
    double b = best[{s.routine_id, s.dtype}];
    bool vs_best = g < rule.threshold / 100.0 * b;
    bool vs_peak = s.perf.pct_peak && *s.perf.pct_peak < kPeakPct;
    if (!vs_best && !vs_peak) continue;
    double target = b;
    if (vs_peak) target = std::max(target, *s.perf.gflops / *s.perf.pct_peak * kPeakPct);
    if (target <= g) continue;
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = fmt::format("{} {}x{}x{} at {}", s.routine, s.m, s.n, s.k, s.call_site);
    std::int64_t small = std::min({s.m, s.n, s.k});
    c.evidence = {{"m", s.m},
                  {"n", s.n},
                  {"k", s.k},
                  {"dtype", s.dtype},
                  {"calls", s.calls},
                  {"time_s", seconds(s.time_ns)},
                  {"pct_run", share(s.time_ns, m.share_base_ns())},
                  {"gflops", g},
                  {"best_shape_gflops", b}};
    if (s.perf.pct_peak) c.evidence.emplace_back("pct_peak", *s.perf.pct_peak);
    if (s.perf.intensity) c.evidence.emplace_back("flops_per_byte", *s.perf.intensity);
    std::string why = vs_best ? fmt::format("{:.0f} % of the routine's best shape ({:.2f} GFLOP/s)",
                                            100.0 * g / b, b)
                              : "";
    if (vs_peak)
      why += fmt::format("{}{:.1f} % of peak", why.empty() ? "" : ", ", *s.perf.pct_peak);
    c.summary =
        fmt::format("{} {}x{}x{} ({}, {} calls, {:.3f} s) reaches {:.2f} GFLOP/s: {}{}", s.routine,
                    s.m, s.n, s.k, s.call_site, s.calls, seconds(s.time_ns), g, why,
                    small < 64 ? fmt::format("; skinny (smallest side {})", small) : "");
    c.advice = std::string(rule.advice);
    if (lower(s.routine).find("convolution") != std::string::npos) {
      c.advice = std::string(kConvolutionAdvice);
    } else if (bool backward = is_autograd_node(s.call_site) && recurrent.count(sizes(s));
               backward || looks_like_recurrence(s.call_site)) {
      c.evidence.emplace_back("recurrence",
                              std::string(backward ? "the backward of products named like a "
                                                     "recurrence, of their sizes"
                                                   : "call site named like a recurrence"));
      std::string site = backward ? fmt::format(
                                        "{} (the backward pass of a recurrence's "
                                        "products, their sizes transposed)",
                                        s.call_site)
                                  : s.call_site;
      std::string layer = torch_recurrent_layer(m);
      c.advice = layer.empty() ? fill(kRecurrenceAdvice, site)
                               : fmt::format(fmt::runtime(kTorchRecurrenceAdvice), site, layer);
    } else if (is_torch_layer_site(s.call_site, m)) {
      c.advice = fill(kTorchLayerAdvice, s.call_site);
    } else {
      c.advice += std::string(kIfIndependent);
    }
    // A small GEMM spread over threads spends much of each call starting and joining them: a
    // red-team 256x64x128 (4.2 MFLOP) ran at 10 GFLOP/s on 2 OpenBLAS threads and 114 on one,
    // and was told to reshape, while the 1-thread run was told to raise the threads.
    constexpr double kSmallForThreads = 16e6;  // FLOPs a call
    if (s.threads && *s.threads > 1 && s.calls > 0 &&
        s.flops / static_cast<double>(s.calls) < kSmallForThreads) {
      c.evidence.emplace_back("threads", *s.threads);
      c.advice += fmt::format(
          "; at {:.1f} MFLOP a call on {} threads, starting and joining the BLAS's threads can be "
          "most of each call: time it with one (OPENBLAS_NUM_THREADS=1, or "
          "torch.set_num_threads(1) for oneDNN) before reshaping",
          s.flops / static_cast<double>(s.calls) / 1e6, *s.threads);
    }
    c.est_gain_s = seconds(s.time_ns) * (1.0 - g / target);
    if (s.perf.pct_peak && *s.perf.pct_peak > 0) {
      // gemm_shapes' own peak: the one for the thread count these calls ran with.
      double peak = g / *s.perf.pct_peak * 100.0;
      bound_gain(
          c, seconds(s.time_ns), s.flops / (peak * 1e9),
          fmt::format("{:.3g} GFLOP at the {} gemm.{} peak for {} ({:.3g} GFLOP/s)", s.flops / 1e9,
                      m.facts.peak_word("gemm." + s.dtype), s.dtype,
                      s.threads ? fmt::format("{} thread{}", *s.threads, *s.threads == 1 ? "" : "s")
                                : std::string("the run's BLAS threads"),
                      peak));
    } else {
      c.gain_bound =
          "bounded by the routine's best shape only: no calibrated peak for this "
          "type and thread count (sonde calibrate)";
    }
    out.push_back(std::move(c));
  }
  return out;
}

// ---- unmeasured -------------------------------------------------------------------------

std::vector<Candidate> unmeasured(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  double pct = share(m.unmeasured_ns, m.total_ns);
  // The threads that wait for work are in neither figure (thread_times: gloo's thread, 6
  // operators at its start then idle for a second, made a 2-rank DDP run's 'unmeasured'
  // candidate; regions cannot attribute a wait for work that is not there).
  if (pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = "<thread>";
  c.evidence = {{"unmeasured_s", seconds(m.unmeasured_ns)},
                {"pct_total", pct},
                {"total_s", seconds(m.total_ns)}};
  c.summary = fmt::format(
      "{:.1f} % of the threads' time ({:.3f} s) is outside any measured "
      "routine",
      pct, seconds(m.unmeasured_ns));
  // Where it is: the thread with the most of it.
  if (!in.unmeasured_threads.empty()) {
    const auto& t = in.unmeasured_threads.front();
    c.evidence.emplace_back("thread", t.name.empty() ? fmt::format("seq {}", t.seq) : t.name);
    c.evidence.emplace_back("thread_unmeasured_s", seconds(t.unmeasured_ns));
  }
  c.advice = std::string(rule.advice);
  c.est_gain_s = 0;  // unknown until that time is attributed
  c.gain_bound = "none: nothing is known of that time until it is measured";
  return {c};
}

// ---- onednn-reorder ---------------------------------------------------------------------

// oneDNN reorders copy a tensor from one memory layout into another (PyTorch's NCHW tensors into
// the blocked layout its convolutions want, and back): no arithmetic, only a copy the model's
// layout could avoid.
std::vector<Candidate> onednn_reorder(const AdviceInput& in, const Rule& rule) {
  const Metrics& m = in.metrics;
  for (const RoutineMetrics& r : m.routines) {
    if (r.kind != kinds::kOnednn || r.name != "dnnl:reorder") continue;
    double pct = share(r.incl_ns, m.share_base_ns());
    if (pct < rule.threshold) return {};
    Candidate c;
    c.rule = std::string(rule.id);
    c.location = r.name;
    c.routine_id = r.routine_id;
    c.evidence = {{"time_s", seconds(r.incl_ns)}, {"pct_run", pct}, {"calls", r.calls}};
    c.summary = fmt::format(
        "oneDNN layout reorders take {:.1f} % of the busy threads' time outside set-up ({:.3f} s "
        "over {} "
        "calls)",
        pct, seconds(r.incl_ns), r.calls);
    c.advice = std::string(rule.advice);
    c.est_gain_s = 0.5 * seconds(r.incl_ns);
    c.gain_bound = fmt::format(
        "at most the reorders' own {:.3f} s (a copy removed entirely); "
        "no calibrated limit applies to removing work",
        seconds(r.incl_ns));
    return {c};
  }
  return {};
}

// ---- data-loading --------------------------------------------------------------------------

// A loop waiting for its batches: t_io, the iterations' data loading, against the whole
// iteration. A red-team run (a DataLoader with 2 workers re-forked every epoch, per-sample
// normalisation in __getitem__) spent 3.76 ms of each 5.8 ms iteration loading, and no rule
// fired.
constexpr std::string_view kOverlapLoading =
    "load the next batches while this one is computed: DataLoader(num_workers=N) with N up to "
    "the cores the step leaves free, persistent_workers=True (workers made once, not every epoch), "
    "prefetch_factor, pin_memory=True for a GPU";
constexpr std::string_view kCheaperBatches =
    "make each batch cheaper: move per-sample work out of __getitem__ into one operation over "
    "the batch (a batch sampler, a collate_fn) and keep decoded data in memory";
// An IterableDataset has neither __getitem__ nor a sampler (a red-team run was told of both).
constexpr std::string_view kCheaperIterableBatches =
    "make each batch cheaper: move per-sample work out of the dataset's __iter__ into one "
    "operation over the batch (yield whole batches with DataLoader(batch_size=None), or a "
    "collate_fn) and keep decoded data in memory";

// Where the program's collate_fn holds most of the loading, the batch's work is there already:
// told to move per-sample work into a collate_fn, a red-team loader was (it was all in one).
constexpr double kCollateHolds = 0.5;  // of the fetches' time

std::string cheaper_batches(const AdviceInput& in) {
  const LoaderWorkers& w = in.loader;
  if (w.collate_share >= kCollateHolds) {
    return fmt::format(
        "make each batch cheaper: {:.0f} % of the loading is the collate_fn {}, which has the "
        "whole batch already, so its own work is the cost (python -m sonde --lines '{}' times "
        "its lines): a loop over the samples there is per-sample work still, better as operations "
        "over the batch's tensors; keep decoded data in memory",
        100 * w.collate_share, w.collate_fn, function_part(w.collate_fn));
  }
  return std::string(w.iterable ? kCheaperIterableBatches : kCheaperBatches);
}

// With workers, what they did says which knob: how many would keep up with the step (each
// batch's cost to a worker against the step's time), whether the cores allow that many, and
// whether they were started again every epoch. The red-team loader's 2 workers took 28 ms of a
// worker per batch against a 0.6 ms step, started 3 times in 3 epochs: the generic advice named
// num_workers and persistent_workers alike, whatever their values.
// Workers that each take `batch_ms` per batch keep up with a `step_ms` step: 0 where unknown.
std::int64_t workers_needed(double batch_ms, double step_ms) {
  if (step_ms <= 0 || batch_ms <= 0) return 0;
  return static_cast<std::int64_t>(std::ceil(batch_ms / step_ms));
}

// The verdict on `have` workers (0: none) where `needed` keep up, against the cores: its
// clause of the advice, with the evidence; "" where unknown.
std::string workers_verdict(const AdviceInput& in, std::int64_t needed, std::int64_t have,
                            Candidate& c) {
  if (needed <= 0) return "";
  c.evidence.emplace_back("workers_needed", needed);
  auto cores = in.metrics.facts.available_cores();
  if (needed <= have)
    return "they keep up on average, so the wait is their start or a short prefetch "
           "(prefetch_factor)";
  if (cores && needed >= *cores)
    return fmt::format("about {} would keep up, more than the {} cores leave room for; {}", needed,
                       *cores, cheaper_batches(in));
  return fmt::format("num_workers={} would keep up{}", needed,
                     cores ? fmt::format(" ({} cores)", *cores) : std::string());
}

std::string loader_workers_advice(const AdviceInput& in, double step_ms, Candidate& c) {
  const LoaderWorkers& w = in.loader;
  double per_batch_ms = w.batches > 0 ? static_cast<double>(w.fetch_ns) / 1e6 / w.batches : 0;
  c.evidence.emplace_back("loader_workers", w.at_once);
  c.evidence.emplace_back("worker_processes", w.processes);
  c.evidence.emplace_back("worker_ms_per_batch", per_batch_ms);
  std::string out = fmt::format(
      "{} DataLoader worker{} at once (num_workers, of the loaders alive together) took {:.2f} "
      "ms of a worker for each of the {} batches, against a step of {:.2f} ms",
      w.at_once, w.at_once == 1 ? "" : "s", per_batch_ms, w.batches, step_ms);
  if (std::string verdict =
          workers_verdict(in, workers_needed(per_batch_ms, step_ms), w.at_once, c);
      !verdict.empty())
    out += ": " + verdict;
  if (w.sets > 1) {
    // Started about once a step: a `next(iter(loader))` in the loop, each a new iterator (a
    // red team's was told to build the DataLoader once, which it did).
    bool per_step = in.breakdown.iterations > 0 && 2 * w.sets >= in.breakdown.iterations;
    out += fmt::format(
        "; the workers were started {} times ({} processes{}; a DataLoader starts them at every "
        "iter(loader): each epoch's for loop{}): persistent_workers=True starts them once{}",
        w.sets, w.processes,
        per_step ? fmt::format(", for {} iterations", in.breakdown.iterations) : "",
        per_step ? ", each next(iter(loader))" : "",
        per_step ? "; or one iterator kept across the steps (it = iter(loader) before the loop, "
                   "next(it) in it, a new one at StopIteration)"
                 : ", and the DataLoader built once");
  }
  return out;
}

// What taking one batch from a worker process costs the loop (the batch pickled into shared
// memory and rebuilt): about 1 ms a batch measured here. A red-team MLP loading 0.51 ms a batch
// from an in-memory TensorDataset was told "num_workers=1 would keep up": 1.7x slower.
constexpr double kWorkerBatchMs = 1.0;
// The least CPU share a batch's loading is taken to need: a loader that blocks almost throughout
// still unpickles, collates and hands its batch over.
constexpr double kMinLoadingCpu = 0.1;

std::vector<Candidate> data_loading(const AdviceInput& in, const Rule& rule) {
  const Breakdown& b = in.breakdown;
  if (!b.found || b.iterations <= 0) return {};
  std::int64_t io_ns = 0, iteration_ns = b.other_ns, compute_ns = 0;
  std::string from;
  for (const BreakdownRow& r : b.rows) {
    iteration_ns += r.time_ns;
    if (r.id == "t_io") {
      io_ns = r.time_ns;
      if (!r.routines.empty()) from = r.routines.front();
    } else {
      compute_ns += r.time_ns;
    }
  }
  double pct = share(io_ns, iteration_ns);
  if (io_ns <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = from.empty() ? "t_io" : from;
  double per = 1e3 / double(b.iterations);
  c.evidence = {{"t_io_s", seconds(io_ns)},
                {"pct_iteration", pct},
                {"iterations", b.iterations},
                {"io_ms_per_iter", seconds(io_ns) * per},
                {"iteration_ms", seconds(iteration_ns) * per},
                {"rest_ms_per_iter", seconds(compute_ns) * per}};
  c.summary = fmt::format(
      "data loading takes {:.1f} % of each {}iteration ({:.3f} of {:.3f} ms, over {} "
      "iterations){}",
      pct, b.inference ? "evaluation " : "training ", seconds(io_ns) * per,
      seconds(iteration_ns) * per, b.iterations,
      from.empty() ? std::string() : fmt::format(", in {}", from));
  if (!in.loader.collate_fn.empty()) {
    c.evidence.emplace_back("collate_fn", in.loader.collate_fn);
    c.evidence.emplace_back("collate_pct_of_fetch", 100 * in.loader.collate_share);
  }
  bool torch = from.find("dataloader.py") != std::string::npos || ran_torch(in.metrics);
  bool loader_frames = from.find("dataloader.py") != std::string::npos;
  std::string generic = fmt::format("{}; {}", kOverlapLoading, cheaper_batches(in));
  if (!torch) {
    c.advice = fill(rule.advice, c.location);
  } else if (in.loader.processes > 0) {
    c.advice = loader_workers_advice(in, seconds(compute_ns) * per, c);
  } else if (loader_frames && std::any_of(in.notes.begin(), in.notes.end(),
                                          [](const Note& n) { return n.topic == "window"; })) {
    // Workers forked before a collection window opened, idle until it, record nothing.
    c.advice =
        "no DataLoader worker fetched a batch inside the collection window (workers "
        "forked before it are not seen): " +
        generic;
  } else if (loader_frames) {
    // Python frames and no worker process: the loop loads each batch itself, at the cost
    // t_io measures.
    c.evidence.emplace_back("loader_workers", std::int64_t{0});
    double io_ms = seconds(io_ns) * per;
    std::string verdict =
        io_ms <= kWorkerBatchMs
            ? fmt::format(
                  "a batch takes {:.2f} ms to load, less than taking it from a worker "
                  "process costs the loop (about {:.0f} ms: pickled into shared memory "
                  "and rebuilt), so workers would not pay; {}",
                  io_ms, kWorkerBatchMs, cheaper_batches(in))
            : workers_verdict(in, workers_needed(io_ms, seconds(compute_ns) * per), 0, c);
    // Where the verdict already asks for cheaper batches, the rest is the overlap's, unless
    // workers would not pay at all.
    c.advice = fmt::format("num_workers=0: the {} loop loads each batch itself; ",
                           b.inference ? "evaluation" : "training") +
               (verdict.empty()           ? generic
                : io_ms <= kWorkerBatchMs ? verdict
                : verdict.ends_with(cheaper_batches(in))
                    ? verdict + "; then " + std::string(kOverlapLoading)
                    : verdict + "; then " + generic);
  } else {
    c.advice = generic;
  }
  // Workers each run the whole __iter__ of an IterableDataset: told num_workers=2, a red-team
  // loop trained on every sample twice (80 iterations for 40) and gained nothing.
  // One whose __iter__ asks get_worker_info() splits it already (a red-team find: told anyway).
  if (torch && in.loader.iterable && !in.loader.sharded &&
      c.advice.find("num_workers") != std::string::npos)
    c.advice +=
        "; with workers, an IterableDataset's __iter__ must give each worker its share of the "
        "stream (torch.utils.data.get_worker_info()), or every worker yields every sample";
  // Loading overlapped with the step is hidden up to the step's own time. Loaded by the loop
  // itself, the batches can also be spread over worker processes on the cores the step leaves
  // (the step holds its share of one): an iteration then takes max(step, loading / W). An
  // evaluation loop loading 98 % of its time was told 0.014 s by the step's bound alone;
  // num_workers=2, as advised, saved 0.56 s of 1.21 (a red-team run).
  auto cores = in.metrics.facts.cores_per_rank();
  if (in.loader.processes == 0 && cores && *cores > 1 && io_ns + compute_ns > 0) {
    // The cores other programs leave (a red-team CNN at a load of 1.3-1.6 others' cores on 2
    // was told about 2 workers: every worker count ran slower), and the loop's own cost of
    // taking each batch from a worker.
    double io = seconds(io_ns), step = seconds(compute_ns);
    double free = double(*cores) - in.others_load.value_or(0.0);
    double cores_left = free - step / (io + step);
    double taking = kWorkerBatchMs * 1e-3 * double(b.iterations);
    c.evidence.emplace_back("worker_cores", std::max(0.0, cores_left));
    // Loading that blocks (a file read, a sleep, a remote fetch) needs a core only for its own
    // part: its workers block side by side. A red-team loader sleeping in __getitem__, on 2
    // cores beside busy programs, was told "none from workers", and 2 workers ran it faster.
    // The loop thread's blocked time (its life less its CPU time and its waits for a core), up
    // to the loading's, is taken as the loading's: the cores left then load 1 / that share
    // batches at a time. The loading's CPU over those cores bounds the iteration as before.
    double cpu_share = 1.0;
    if (in.loop_blocked_s && io > 0) {
      cpu_share = std::clamp(1.0 - std::min(io, *in.loop_blocked_s) / io, kMinLoadingCpu, 1.0);
      c.evidence.emplace_back("loading_cpu_share", cpu_share);
    }
    double workers = cores_left / cpu_share;  // the loading's work over the cores left
    std::string blocking = cpu_share < 0.9
                               ? fmt::format(
                                     " (the loading on a core {:.0f} % of its time, blocked "
                                     "the rest)",
                                     100 * cpu_share)
                               : "";
    if (workers < 1.0) {
      // Less than a core left: a worker would take its time from the step's core or others'.
      // Rounded up to one core, a red-team loop at a load of 3-7 on 2 cores was promised
      // 0.18 s, and 1 or 2 workers ran it slower each time (0.51-0.88 s against 0.42-0.69).
      c.est_gain_s = 0;
      c.gain_bound = fmt::format(
          "none from workers: the step and other programs leave {:.1f} of the {} cores, less "
          "than a worker's loading needs{}; cheaper batches are what gains here",
          std::max(0.0, cores_left), *cores, blocking);
    } else {
      c.est_gain_s = 0.8 * std::max(0.0, io + step - std::max(step + taking, io / workers));
      c.gain_bound = fmt::format(
          "loading spread over worker processes on the {:.1f} cores the step and other "
          "programs leave{}, overlapping the step: an iteration takes at least the step's own "
          "time and the loop's {:.0f} ms of taking each batch from a worker, and the loading's "
          "CPU over those cores",
          cores_left, blocking, kWorkerBatchMs);
    }
  } else {
    c.est_gain_s = 0.8 * seconds(std::min(io_ns, compute_ns));
    c.gain_bound =
        "loading that overlaps the step hides behind it only up to the step's own "
        "time (the rest of the iteration)";
    // Workers started again and again: the loop waits for each set's start and first batch,
    // which started once is gone, not hidden. Of t_io, one set's share stays, and the loading
    // the workers cannot hide behind the step in steady state. A red team's
    // next(iter(loader)) per step (2 workers, 30 sets in 30 steps) was told 0.014 s; started
    // once (persistent_workers=True) it ran 0.36 s faster of 0.48-0.51.
    const LoaderWorkers& w = in.loader;
    if (w.sets > 1 && w.at_once > 0 && w.batches > 0) {
      double io = seconds(io_ns);
      double steady = std::max(0.0, seconds(w.fetch_ns) / double(w.at_once) - seconds(compute_ns));
      double restarts = 0.8 * std::max(0.0, io - io / double(w.sets) - steady);
      if (restarts > c.est_gain_s) {
        c.est_gain_s = restarts;
        c.evidence.emplace_back("worker_sets", w.sets);
        c.gain_bound = fmt::format(
            "the workers started once instead of {} times: of the loading's time, one start's "
            "share stays, and the fetching their {} worker{} cannot hide behind the step "
            "({:.3f} s)",
            w.sets, w.at_once, w.at_once == 1 ? "" : "s", steady);
      }
    }
  }
  return {c};
}

// ---- distribution-checks ----------------------------------------------------------------

std::vector<Candidate> distribution_checks(const AdviceInput& in, const Rule& rule) {
  const DistributionChecks& d = in.distributions;
  double pct = share(d.ns, in.metrics.share_base_ns());
  if (d.ns <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = d.caller.empty() ? "torch.distributions" : d.caller;
  c.evidence = {{"checks_s", seconds(d.ns)}, {"checks_calls", d.calls}, {"pct_run", pct}};
  c.summary = fmt::format(
      "torch.distributions checked arguments and samples against their constraints {} times, "
      "{:.1f} % of the busy threads' time outside set-up ({:.3f} s){}",
      d.calls, pct, seconds(d.ns),
      d.caller.empty() ? "" : fmt::format(", most under {}", d.caller));
  c.advice = std::string(rule.advice);
  // The checks' own time: what turning them off saves, less a little for what stays.
  c.est_gain_s = 0.9 * seconds(d.ns);
  c.gain_bound = "the checks' own time, measured: nothing else changes";
  return {c};
}

// ---- einsum -------------------------------------------------------------------------------

std::vector<Candidate> einsum_loop(const AdviceInput& in, const Rule& rule) {
  const EinsumCalls& e = in.einsum;
  double pct = share(e.ns, in.metrics.share_base_ns());
  if (e.ns <= 0 || pct < rule.threshold) return {};
  Candidate c;
  c.rule = std::string(rule.id);
  c.location = e.caller.empty() ? "numpy.einsum" : e.caller;
  c.evidence = {{"einsum_s", seconds(e.ns)}, {"einsum_calls", e.calls}, {"pct_run", pct}};
  c.summary = fmt::format(
      "numpy.einsum ran its contractions in numpy's own loop (optimize=False, the default) {} "
      "times, {:.1f} % of the busy threads' time outside set-up ({:.3f} s){}",
      e.calls, pct, seconds(e.ns),
      e.caller.empty() ? "" : fmt::format(", most under {}", e.caller));
  c.advice = fill(rule.advice, c.location);
  // The subscripts are not recorded: a product over an index two operands share gains most
  // of its time (the red team's 96 %), an element-wise one nothing.
  c.est_gain_s = 0.5 * seconds(e.ns);
  c.gain_bound =
      "half its time: the expression is not recorded; one that sums over an index two operands "
      "share (a matrix product, batched or chained) runs as BLAS GEMMs with optimize=True and "
      "keeps a few % of its time (a red team's attention and chain: 3.29 -> 0.12 s), an "
      "element-wise one ('ij,ij->i') gains nothing";
  return {c};
}

const std::array<Rule, 29> kRules{{
    {"optimizer-update",
     "a region or Python function named like update/adam/sgd/optimizer, or the step of a "
     "torch.optim.Optimizer subclass of the program's own, takes at least threshold % of the "
     "busy threads' time outside set-up with under 25 % of its time in FLOP-counted BLAS",
     5.0,
     "fuse and vectorise the parameter update in {}: one pass over each parameter instead of "
     "one temporary array per numpy operation: in-place ufuncs (a *= b, np.multiply(a, b, "
     "out=a)), numexpr or numba, or a compiled kernel",
     "0.8 x (its work - BLAS time in it; 0.3 for torch.optim's per-parameter loop on the CPU "
     "or a step already on foreach, 0.5 for an own torch step's loop: what the advice saved "
     "where tried), its work being its inclusive time less the other "
     "phases it calls where it calls other update phases (forward and backward under "
     "Chainer's Optimizer.update); the bound states the bytes per call under which that "
     "holds at the calibrated mem.bw (N bytes take N / mem.bw)",
     optimizer_update},
    {"blas-threads",
     "run_info blas.threads < available cores (affinity_cores, else cores; one rank's share "
     "where ranks share a host) and FLOP-counted BLAS/oneDNN calls take at least threshold % "
     "of the busy threads' time outside set-up",
     5.0,
     "let BLAS use all {} cores (OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS unset "
     "or raised), or link a multi-threaded BLAS",
     "GEMM time x (1 - blas.threads / cores), at most GEMM time - FLOPs / the calibrated "
     "GEMM peak for all cores",
     blas_threads},
    {"framework-threads",
     "run_info torch.num_threads < available cores (one rank's share where ranks share a "
     "host, less the DataLoader workers alive at once) and oneDNN calls that ran on fewer "
     "threads than the cores take at least threshold % of the busy threads' time outside set-up",
     5.0,
     "give torch's intra-op pool the {} cores: torch.set_num_threads({}) at the program's "
     "start (and what set it lower: the environment's OMP_NUM_THREADS, said where recorded); "
     "oneDNN's convolutions and matmuls run on that pool, whatever the BLAS is set to",
     "oneDNN time x (1 - torch.num_threads / cores), at most that time - FLOPs / the "
     "calibrated GEMM peak for all cores",
     framework_threads},
    {"threads-contended",
     "more compute threads (the larger of run_info torch.num_threads and blas.threads, at least "
     "2) than the whole cores of the cgroup's CPU quota (run_info cpu.quota) where it binds, "
     "else than the cores other programs left over the run (measured, half a core of them or "
     "more; else the load average less the run's own, a core or more), and the work of the "
     "pools wider than that (the BLAS's calls; oneDNN calls and torch operators' own time, "
     "not torch.distributed's, for torch's pool) takes at least threshold % of the busy "
     "threads\' time outside set-up",
     5.0,
     "as many threads as the cores the others leave, {}, while the host is this busy: "
     "torch.set_num_threads({}) at the program's start and OPENBLAS_NUM_THREADS={} "
     "(OMP_NUM_THREADS={} sets both where the program does not), or run where the cores are "
     "free; a parallel region waits for its slowest thread, and a thread that shares its core "
     "with another program waits out that program's time slices. Measure it (sonde tune) "
     "under the same load",
     "that work x (1 - threads left / threads), the threads past the cores left: a lower "
     "bound, since each region's wait for a preempted thread costs more",
     threads_contended},
    {"subnormals",
     "fpu.ftz = 0 and fpu.daz = 0 and a note of topic 'denormals' (subnormal GEMM operands or "
     "Python call arguments sampled); threshold is the cost of arithmetic on a subnormal "
     "element against a normal one (4x: float32 division 4.2x, square root 2.7x measured here)",
     4.0,
     "rescale or clamp the values that underflow (flush them to 0 where they no longer matter), "
     "or enable flush-to-zero and denormals-are-zero on every thread that computes with them "
     "(MXCSR FTZ/DAZ: SONDE_FTZ=1 under sonde tries it; torch.set_flush_denormal(True) sets "
     "the calling thread only, and a BLAS pool's threads keep theirs)",
     "T f (p - 1) / (1 - f + f p), p = threshold, T the time of the routines named in the notes "
     "(else of the BLAS/oneDNN calls), f the sampled share of subnormal elements (1 unknown: "
     "at most T (1 - 1/p)); for GEMM operands at least the calls' distance from their "
     "attainable rate, T (1 - GFLOP/s / attainable), where that is more: a vector FMA with one "
     "subnormal lane takes a microcode assist, so the element share understates it",
     subnormals},
    {"float64",
     "GEMMs (BLAS GEMM and SYRK calls and oneDNN primitives, outermost) in float64 take at "
     "least threshold % of the busy "
     "threads\' time outside set-up",
     10.0,
     "float32 if its precision suffices (the advice names where float64 comes from in torch or "
     "numpy programs), and compare the results",
     "their time x (1 - gemm.f64 peak / gemm.f32 peak) at the run's BLAS threads, as calibrated "
     "(1/2 where not)",
     float64_gemms},
    {"bfloat16",
     "GEMMs (BLAS GEMM and SYRK calls and oneDNN primitives, outermost) in float32 take at least "
     "threshold % of the busy threads' time outside set-up of a torch program, on a CPU with "
     "bfloat16 units (run_info cpu.bf16: AMX or AVX512_BF16)",
     10.0,
     "torch.autocast(\"cpu\", dtype=torch.bfloat16) around the forward pass and the loss, if the "
     "model's accuracy holds (compare the loss)",
     "their time x (1 - gemm.f32 peak / gemm.bf16 peak) at the run's BLAS threads, as calibrated "
     "(1/2 where not)",
     float32_gemms_on_bf16},
    {"blas-kernels",
     "an OpenBLAS runs kernels with narrower vectors than the CPU offers (run_info blas.config's "
     "core against cpu.vector_isa: DYNAMIC_ARCH falls back to its SSE3 Prescott kernels on a "
     "CPU newer than the release), and its matrix-matrix and LAPACK calls take at least "
     "threshold % of the busy threads' time outside set-up",
     10.0,
     "OPENBLAS_CORETYPE set to the core of the CPU's vectors (SkylakeX, Haswell, Sandybridge) "
     "where the build has DYNAMIC_ARCH, else an OpenBLAS built for this CPU; compare the results",
     "their time x (1 - kernel vector bits / the CPU's)", blas_kernels},
    {"gemm-shape",
     "a GEMM shape taking at least 1 % of the busy threads' time outside set-up reaches under "
     "threshold % of its "
     "routine's "
     "best shape GFLOP/s, or under 10 % of the peak when known",
     50.0,
     "batch the small or skinny products into larger GEMMs (concatenate, batched GEMM), "
     "reorder dimensions so the long side is not k, or pick a layout the BLAS handles better",
     "shape time x (1 - GFLOP/s / target), target = max(best shape GFLOP/s, 10 % of peak), at "
     "most shape time - its FLOPs / the calibrated peak for its thread count",
     gemm_shape},
    {"unmeasured",
     "the thread roots' exclusive time (outside any measured routine) is at least threshold % "
     "of the busy threads' time outside set-up",
     20.0,
     "attribute that time: mark phases with sonde regions (with sonde.region(\"forward\") in "
     "Python, sonde_region_begin/end in C and C++, or NVTX ranges), run "
     "Python under python3 -m sonde, or check start-up and idle threads",
     "0 (unknown until that time is measured)", unmeasured},
    {"onednn-reorder",
     "oneDNN's reorders (dnnl:reorder: copies of a tensor into another memory layout) take at "
     "least threshold % of the busy threads' time outside set-up",
     5.0,
     "keep tensors in the layout the convolutions use: channels-last in PyTorch "
     "(model.to(memory_format=torch.channels_last) and the inputs too), and for inference "
     "torch.jit.optimize_for_inference(torch.jit.script(model.eval())), which converts the "
     "weights to oneDNN's layout once instead of at every call (torch.jit.freeze alone kept "
     "every reorder of a CNN here). Time the change: the convolutions' own time changes with "
     "the layout too, either way (an MNIST CNN of 1- and 32-channel inputs lost its reorders "
     "in channels-last and ran 4 % slower)",
     "0.5 x reorder time (the reorders at the model's inputs and outputs remain)", onednn_reorder},
    {"gpu-copies",
     "host<->device copies (CPU time in CUDA calls of role copy, else the GPU's "
     "memcpy activity time) take at least threshold % of the busy threads' time outside set-up",
     5.0,
     "keep tensors on the device between steps, copy from pinned memory (cudaMallocHost, "
     "DataLoader(pin_memory=True)) with asynchronous copies that overlap compute, and batch "
     "small copies",
     "0.5 x copy time (what overlapping or removing copies typically hides)", gpu_copies},
    {"data-loading",
     "the iteration breakdown found the training loop, and its data loading (t_io) takes at "
     "least threshold % of the iterations' time",
     20.0,
     "load the next batches while this one trains, in a thread or processes of their own, and "
     "make the per-sample work in {} one operation over the batch; keep decoded data in memory",
     "0.8 x min(t_io, the rest of the iterations' time): overlapped loading hides behind the "
     "step, up to the step's own time",
     data_loading},
    {"torch-operator",
     "one ATen operator's own time (outside the BLAS and oneDNN calls beneath it) takes at "
     "least threshold % of the busy threads' time outside set-up; at most 3",
     15.0, "make {} cheaper or fewer: fuse it with its neighbours, run it on smaller tensors",
     "0.5 x the operator's own time (at most all of it, the work removed); a dropout's all of "
     "it; 0 for a GEMM or convolution operator whose library call was not seen",
     torch_operator},
    {"embedding-dense-grad",
     "the dense backward of nn.Embedding or nn.EmbeddingBag (aten::embedding_backward, "
     "aten::_embedding_bag_backward) takes at least threshold % of the busy threads' time "
     "outside set-up, and at least 10 times their lookups (aten::embedding): a gradient of far "
     "more rows than a batch looks up, on a run without GPU activity",
     5.0,
     "nn.Embedding(..., sparse=True) (nn.EmbeddingBag too) with an optimizer that takes sparse "
     "gradients for the table (torch.optim.SparseAdam, SGD, Adagrad; give the table its own "
     "SparseAdam and the rest of the model Adam): the backward then builds a gradient of the "
     "looked-up rows alone and the update touches only them. Weight decay and momentum then "
     "act on those rows only: compare the results",
     "0.9 x the dense backward + 0.5 x the update (the table's share of it unknown)",
     embedding_dense_grad},
    {"small-operators",
     "a training loop of at least 20 iterations (the iteration breakdown's, on the CPU) calls "
     "operators of under 20 us each on average (ATen operators and autograd nodes, nested ones "
     "too: the iterations' time less data loading over their calls), and the FLOPs counted "
     "beneath them would take under a quarter of that time at the run's best GEMM or oneDNN "
     "rate; the rest takes at least threshold % of the busy threads' time outside set-up",
     20.0, "a larger batch per step, or fewer, fused operators",
     "0.5 x the iterations' time outside their counted arithmetic (at the run's best rate) and "
     "data loading: what a batch twice as large saves on the same samples",
     small_operators},
    {"python-loop",
     "a Python function of the program's own makes at least 10,000 small calls (torch "
     "operators, numpy's or torch's Python functions of under 50 us each, or helpers of its "
     "own made of such calls, under 500 us), one of them at least 32 times per call of the "
     "function, and is no training loop (no backward or optimizer step among its calls or "
     "beneath them); with the function's own time they take at least threshold % of the busy "
     "threads\' time outside set-up; at most 3",
     5.0,
     "write the loop in {} as operations over whole tensors or arrays (index tensors and "
     "masks, one reduction over a dimension, broadcasting); a recurrent cell stepped in Python "
     "as its fused layer, a stack of small modules compiled",
     "0.9 x (the function's own time + its small calls' time + their autograd nodes' time in "
     "the backward, in the share of each operator's calls the function made); 0.4 x for a "
     "recurrent cell or a stack of module calls, whose steps stay",
     python_loop},
    {"matrix-vector",
     "BLAS matrix-vector products (GEMV routines) called at least 1,000 times from one calling "
     "routine take at least threshold % of the busy threads' time outside set-up",
     5.0,
     "stack the vectors that do not depend on each other's results into one matrix and make "
     "one matrix product per matrix (a GEMM reads the matrix once, not once per vector)",
     "0.8 x (their time - their FLOPs at the calibrated GEMM peak of their dtype and threads); "
     "0.5 x their time where no peak is calibrated",
     batch_matrix_vector},
    {"gpu-sync",
     "CUDA synchronisation calls (names with Synchronize) take at least threshold % of the busy "
     "threads\' time outside set-up: the host waits for the GPU instead of queueing work",
     5.0,
     "remove per-step host synchronisation (loss.item(), .cpu(), printing tensors, "
     "cudaDeviceSynchronize in the loop); synchronise with events on streams, and read metrics "
     "every N steps",
     "0.5 x synchronisation time", gpu_syncs},
    {"gpu-launches",
     "CPU time in kernel launch calls (names with Launch) is at least threshold % of the busy "
     "threads\' time outside set-up",
     5.0,
     "launch fewer, larger kernels: fuse elementwise operations (torch.compile, fused "
     "optimizers), capture the step in a CUDA graph, or enlarge the batch",
     "0.5 x launch time", gpu_launches},
    {"gpu-kernel",
     "a GPU kernel takes at least threshold % of the GPU's kernel time; ranked as TAU ranks "
     "tuning candidates, by warps per instruction x time where SONDE_GPU_METRICS recorded them, "
     "else by time",
     10.0,
     "look at {} first: check its occupancy, memory throughput and warp efficiency "
     "(SONDE_GPU_METRICS, or Nsight Compute: ncu -k <kernel>), and its grid and block sizes",
     "0.5 x time x (1 - the larger of its SM and memory throughput % of peak / 100) where those "
     "metrics were recorded, else 0",
     gpu_kernels},
    {"rank-imbalance",
     "a routine or phase (outside communication) takes its slowest rank at least threshold % "
     "longer than the mean over "
     "ranks, each rank's time in it taken outside the communication, set-up and imports "
     "beneath it, and the difference is at least 1 % of a rank's busy time; of a caller and a "
     "callee holding 90 % of its lost time, only the callee (one imbalance, one candidate)",
     10.0,
     "even out the work per rank (partition the data or the model by cost, not by count), or "
     "move the slow rank's extra work (I/O, logging, checkpoints on rank 0) off the step",
     "max - mean (what the other ranks wait for the slowest)", rank_imbalance},
    {"comm-exposed",
     "time inside blocking communication and waits is at least threshold % of a rank's busy "
     "time, on average over ranks",
     10.0,
     "overlap communication with computation: start nonblocking collectives (MPI_Iallreduce per "
     "layer during backward, DDP's bucketed all-reduce) and wait only where the result is needed",
     "0.5 x exposed time per rank", comm_exposed},
    {"distribution-checks",
     "torch.distributions' argument and sample checks (constraints.py's check, "
     "distribution.py's _validate_sample; on by default) take at least threshold % of the busy "
     "threads\' time outside set-up",
     3.0,
     "turn the checks off once the program is debugged: "
     "torch.distributions.Distribution.set_default_validate_args(False) at start, or "
     "validate_args=False for the distributions made in the loop (python -O does too); they "
     "check every parameter at each construction and every sample at each log_prob",
     "0.9 x the checks' time", distribution_checks},
    {"einsum",
     "numpy.einsum calls that ran their contraction in numpy's own C loop (no einsum_path or "
     "tensordot beneath them: optimize=False, the default) take at least threshold % of the "
     "busy threads' time outside set-up",
     5.0,
     "pass optimize=True to the np.einsum calls in {} (or optimize='greedy'): a contraction "
     "over an index two operands share then runs as BLAS matrix products (tensordot), a chain "
     "of three or more operands in the cheapest order; or write it as a matmul (a @ b, "
     "np.matmul over a batch)",
     "0.5 x their time (the expression is not recorded: a product gains most of it, an "
     "element-wise one nothing)",
     einsum_loop},
    {"anomaly-mode",
     "autograd's anomaly mode is on (operators calling Python's traceback to store the stack "
     "of their call; the backward's NaN checks, aten::isnan and aten::any under autograd's "
     "evaluate_function) and those take at least threshold % of the busy threads' time "
     "outside set-up",
     3.0,
     "turn anomaly mode off for training: torch.autograd.set_detect_anomaly(False), or "
     "torch.autograd.detect_anomaly() only around the step being debugged; it stores a Python "
     "stack for every operator of the forward and checks every output of the backward for NaN",
     "the stack records' and NaN checks' time", anomaly_mode},
    {"module-hooks",
     "nn.Module hooks (what torch.nn's _call_impl calls besides the module's forward: forward "
     "and pre-forward hooks, full backward hooks' set-up; and the backward hooks' autograd "
     "nodes) take at least threshold % of the busy threads' time outside set-up",
     5.0,
     "hooks run at every call of their module: keep them for the steps that read them (the "
     "handle register_*_hook returns, handle.remove() after), record every Nth step, and keep "
     ".item(), .cpu() and printing out of them (each waits for the device on a GPU); a full "
     "backward hook also wraps its module's inputs and outputs in BackwardHookFunction at "
     "every call",
     "0.9 x the hooks' time", module_hooks},
    {"torch-profiler",
     "the PyTorch profiler's own frames (torch.profiler's, torch.autograd.profiler's profile "
     "and event tables; not record_function) take at least threshold % of the busy threads' "
     "time outside set-up",
     5.0,
     "profile a few steps, not the run: torch.profiler.profile(schedule=torch.profiler."
     "schedule(wait=1, warmup=1, active=3), on_trace_ready=...) with prof.step() each "
     "iteration, and record_shapes or with_stack only when they are read; or leave the "
     "profiling to sonde alone",
     "0.9 x the profiler's own frames", torch_profiler},
    {"small-collectives",
     "a collective of messages under threshold KiB is called at least 10 times per rank and "
     "takes at least 1 % of a rank's busy time",
     64.0,
     "fuse or bucket the small collectives: flatten the tensors into one buffer per step (or "
     "per bucket of ~25 MB, as DDP's bucket_cap_mb) and reduce it with one call",
     "0.5 x their time per rank", small_collectives},
}};

}  // namespace

bool looks_like_optimizer(std::string_view routine_name) {
  if (names_an_update(function_part(routine_name))) return true;
  // A moving average of the weights by its own name (ema_step, EMA.apply, swa_average), whole
  // words only (no schema, no cinema): a red-team ema_step() beside opt.step, 1.4 times the
  // step's time, was no candidate.
  std::vector<std::string> words = words_of(function_part(routine_name));
  auto has = [&](std::string_view w) {
    return std::find(words.begin(), words.end(), w) != words.end();
  };
  return has("ema") || has("ewma") || has("swa") || (has("moving") && has("average"));
}

std::span<const Rule> rules() { return kRules; }

AdviceInput load_advice_input(const ProfileFile& file) {
  LoadedProfile profile(file);
  return load_advice_input(profile);
}

// How much longer than their work the run's calls took for want of a core: the busiest
// thread's wall time over its CPU time, where other programs held at least half a core (else
// 1: a thread off its core for its own waits is no stretch of its calls). A GRUCell stepped
// 20,000 times from Python, 13-17 us a step quiet, read 70-250 us a step beside a CI run and
// three busy loops on 2 cores (its thread on its core 6-17 % of the time), above the python-loop
// rule's 50 us bound for a small call, and the loop was not found (CI's flaky test).
// Bounded by 4 x (the others' load + 1) too: a thread off its core for its own waits on a
// host others keep a little busy is not stretched 20 times (its 1 ms calls read as small).
double call_stretch(const AdviceInput& in) {
  constexpr double kMinOthers = 0.5, kMost = 20, kPerLoad = 4;
  if (!in.others_load || *in.others_load < kMinOthers || !in.busiest_cpu_share ||
      *in.busiest_cpu_share <= 0)
    return 1;
  double most = std::min(kMost, kPerLoad * (*in.others_load + 1));
  return std::clamp(1 / *in.busiest_cpu_share, 1.0, most);
}

AdviceInput load_advice_input(LoadedProfile& profile) {
  const ProfileFile& file = profile.file();
  AdviceInput in;
  in.metrics = profile.metrics();
  in.notes = profile.run().notes;
  in.gpu = profile.gpu();
  in.ranks = load_rank_summary(file);
  in.optimizer_work = optimizer_work(profile.forest().busy);
  // A walk over every busy node: only where the bfloat16 rule, its one reader, can fire.
  if (in.metrics.facts.info.contains("cpu.bf16"))
    in.gemm_under_torch_ns = torch_gemm_time(profile.forest().busy);
  in.matrix_vector = matrix_vector_sites(profile.forest().busy);
  in.breakdown = profile.breakdown();
  in.loader =
      load_loader_workers(file, in.breakdown.found ? &in.breakdown.loader_callers : nullptr);
  // A scan of every node (0.24 s of 1M): only where blas-threads, its one reader, may fire.
  auto blas_threads = in.metrics.facts.blas_threads;
  auto cores = in.metrics.facts.cores_per_rank();
  if (blas_threads && cores && *blas_threads < *cores)
    if (auto st = file.prepare(
            "SELECT COALESCE(MAX(k), 0) FROM (SELECT COUNT(DISTINCT n.thread_id) AS k FROM nodes "
            "n JOIN threads t USING (thread_id) WHERE n.calls > 0 AND n.routine_id IN (SELECT "
            "routine_id FROM routines WHERE kind = 'blas') GROUP BY t.process_id)");
        st.step())
      in.blas_calling_threads = st.int64(0);
  in.distributions = load_distribution_checks(file);
  in.einsum = load_einsum_calls(file);
  in.debug = load_debug_tools(file);
  in.operator_flops = load_operator_flops(file);
  {
    auto st = file.prepare(
        "SELECT COALESCE(name, ''), seq, CAST(ROUND(unmeasured_s * 1e9) AS INTEGER) "
        "FROM thread_times WHERE busy ORDER BY unmeasured_s DESC");
    while (st.step()) in.unmeasured_threads.push_back({st.text(0), st.int64(1), st.int64(2)});
  }
  if (auto it = in.metrics.facts.info.find("host.load"); it != in.metrics.facts.info.end()) {
    char* end = nullptr;
    double load = std::strtod(it->second.c_str(), &end);
    if (end != it->second.c_str() && load >= 0) in.host_load = load;
    // The run's threads' CPU time over its wall time; where the kernel's per-thread clocks were
    // not read, its busy threads each taken as a whole core's load.
    auto st = file.prepare(
        "SELECT CASE WHEN COUNT(cpu_s) = COUNT(*) AND w.wall_s > 0 THEN SUM(cpu_s) / w.wall_s "
        "ELSE SUM(busy) END FROM thread_times, (SELECT wall_s FROM run_totals) w");
    if (in.host_load && st.step() && !st.is_null(0)) in.own_load = st.real(0);
  }
  {
    constexpr double kMinWindowS = 1.0;
    auto busy = info_number(in.metrics.facts, "host.cpu_busy_s");
    auto window = info_number(in.metrics.facts, "host.cpu_window_s");
    // Only where the file holds every rank of its host: one rank's file (prof.rank1.db) would
    // read its sibling ranks as other programs (a review's case: 4 ranks on 8 cores, each told
    // of 6 cores of others). A file of ranks on several hosts takes one host's reading less
    // every host's threads, and reads none: left out too.
    std::int64_t ranks = std::max<std::int64_t>(1, in.ranks.ranks);
    std::int64_t hosts = 1;
    if (auto h = file.prepare("SELECT COUNT(DISTINCT host) FROM rank_times"); h.step())
      hosts = std::max<std::int64_t>(1, h.int64(0));
    auto st = file.prepare("SELECT SUM(cpu_s), COUNT(cpu_s) = COUNT(*) FROM thread_times");
    if (busy && window && *window >= kMinWindowS && hosts == 1 &&
        ranks >= in.metrics.facts.ranks_on_host && st.step() && !st.is_null(0) && st.int64(1))
      in.others_load = std::max(0.0, (*busy - st.real(0)) / *window);
  }
  // Under a CPU quota that binds (a container's), the host's CPUs are other containers' too:
  // their load says nothing of the cores the quota gives, and the run's threads are held to
  // the quota (available_cores), its throttling the measure (threads-contended).
  if (in.metrics.facts.quota_binds()) {
    in.others_load.reset();
    in.host_load.reset();
  }
  {
    auto st = file.prepare(
        "SELECT cpu_s / time_s FROM thread_times WHERE busy AND cpu_s IS NOT NULL AND time_s > 0 "
        "ORDER BY counted_s DESC LIMIT 1");
    if (st.step() && !st.is_null(0)) in.busiest_cpu_share = st.real(0);
  }
  {
    auto st = file.prepare(
        "SELECT MAX(0, t.time_s - t.cpu_s - CAST(i.value AS REAL)) FROM thread_times t "
        "JOIN run_info i ON i.process_id = t.process_id AND i.key = 'thread.runq_s' "
        "WHERE t.seq = 0 AND t.cpu_s IS NOT NULL ORDER BY t.process_id LIMIT 1");
    if (st.step() && !st.is_null(0)) in.loop_blocked_s = st.real(0);
  }
  in.op_loops = op_loops(profile.forest().busy, call_stretch(in));
  bool has_lines = false;
  if (file.has_table("line_costs")) {
    auto st = file.prepare("SELECT EXISTS (SELECT 1 FROM line_costs)");
    has_lines = st.step() && st.int64(0) != 0;
  }
  if (has_lines) in.lines = compute_line_costs(file);
  return in;
}

namespace {

// A candidate whose figures another candidate's cause explains: a GEMM's GFLOP/s measured
// under contended threads or subnormal operands says nothing of its shape. Two red-team runs:
// gemm-shape blamed a Sinkhorn's 1024x64x1024 products (the same GEMMs reached 74 % of peak
// with their subnormals flushed) and a CNN's convolutions, whose advised channels-last made
// the run 2x slower at 8 threads on 2 cores; their gains added up to more than the work.
// A loop of small calls explains the operators it calls and a collate_fn's loading time: a
// red-team collate padding token by token read aten::select's 1.7M calls as "passes over
// memory" (bfloat16, fused attention), its 0.85 s inside the loading already counted.
struct Explained {
  std::string_view rule, by;
  bool (*applies)(const Candidate& by, const Candidate& explained);
};
bool always(const Candidate&, const Candidate&) { return true; }
const Cell* evidence_of(const Candidate& c, std::string_view key) {
  for (const auto& [k, value] : c.evidence)
    if (k == key) return &value;
  return nullptr;
}
// A text evidence value, or nullptr where the key is missing or holds a number.
const std::string* text_evidence(const Candidate& c, std::string_view key) {
  const Cell* v = evidence_of(c, key);
  return v ? std::get_if<std::string>(v) : nullptr;
}
bool of_gemm_operands(const Candidate& by, const Candidate&) {  // subnormals at BLAS/oneDNN
  const std::string* text = text_evidence(by, "affected");
  return text != nullptr && text->starts_with("BLAS/oneDNN calls");
}
// An operator in the loop's small calls (beneath its module calls and helpers too): the loop's
// remedy is its. A red-team GRUCell loop's aten::gru_cell, 26 us a call beneath the cell's
// module call, was a candidate of its own beside the loop's, the same seconds twice.
bool op_of_loop(const Candidate& loop, const Candidate& op) {
  const std::string* names = text_evidence(loop, "operators");
  if (names == nullptr) return false;
  for (std::size_t at = names->find(op.location); at != std::string::npos;
       at = names->find(op.location, at + 1)) {
    std::size_t end = at + op.location.size();
    if ((at == 0 || (*names)[at - 1] == ' ') && (end == names->size() || (*names)[end] == ','))
      return true;
  }
  return false;
}
// An operator of a few microseconds a call in a loop of such calls: the loop's remedy (a larger
// batch, fewer operators) is its, not a cheaper kernel.
bool small_operator(const Candidate&, const Candidate& op) {
  const Cell* v = evidence_of(op, "ms_per_call");
  const auto* ms = v ? std::get_if<double>(v) : nullptr;
  return ms != nullptr && *ms * 1e6 < double(kSmallCallNs);
}
// The dense backward of an embedding: its remedy is sparse gradients, not a fused operator.
bool embedding_backward_op(const Candidate&, const Candidate& op) {
  return op.location == "aten::embedding_backward" ||
         op.location == "aten::embedding_dense_backward" ||
         op.location == "aten::_embedding_bag_backward" ||
         op.location == "aten::_embedding_bag_dense_backward";
}
// A loop inside a training loop's steps (a loss summed per sample) is what makes its operators
// many and small: the step's per-operator cost is the inner loop's, whose remedy comes first.
bool inner_loop_of_steps(const Candidate& loop, const Candidate& steps) {
  return evidence_of(loop, "training_steps") != nullptr && loop.location == steps.location;
}
// An update's loop over its parameters, a few small operators each (an EMA's
// pe.mul_(d).add_(pm)): the optimizer-update candidate of the same routine names the remedy
// (torch._foreach_*, lerp_). A red team's ema_update read both, 0.193 + 0.126 s of its 0.241 s;
// the _foreach_ rewrite saved 0.08-0.095 s.
bool same_routine(const Candidate& update, const Candidate& loop) {
  return update.location == loop.location;
}
// A product's shape or a matrix-vector product called in a loop of small calls: the loop's
// remedy (one product over the stacked operands) is theirs. The red team's 3x3 rotations read
// gemm-shape alone, est. 0.020 s, for a loop whose stacking gained 0.313 s.
bool product_in_loop(const Candidate& loop, const Candidate& product) {
  if (product.rule == "gemm-shape") return product.location.ends_with(" at " + loop.location);
  const std::string* caller = text_evidence(product, "caller");
  return caller && *caller == loop.location;
}
// torch.optim's loop over the parameters (per parameter or multi-tensor) in a CPU training loop
// of small operators: its seconds are in the iterations the small-operators candidate prices,
// and its operators are as small (a red team's Adam over 6 tensors at batch 8 read 0.202 s
// beside that candidate's 0.794; the foreach it was told to time made the update 50-65 %
// slower, a batch twice as large halved it with the rest of the loop).
bool torch_optim_update(const Candidate&, const Candidate& update) {
  std::string fn = function_part(update.location);
  return fn.starts_with("_single_tensor_") || fn.starts_with("_multi_tensor_");
}
bool collate_loop(const Candidate& loop, const Candidate& loading) {
  const std::string* collate = text_evidence(loading, "collate_fn");
  return collate && *collate == loop.location;
}
constexpr Explained kExplained[] = {
    {"gemm-shape", "threads-contended", always},
    // Kernels narrower than the CPU's vectors reach a fraction of the peak calibrated with its
    // own: a red team's square 400^3 GEMMs at 10 % of it were told to batch (no gain) where
    // OPENBLAS_CORETYPE ran them 4 times faster.
    {"gemm-shape", "blas-kernels", always},
    {"gemm-shape", "subnormals", of_gemm_operands},
    {"torch-operator", "python-loop", op_of_loop},
    {"torch-operator", "small-operators", small_operator},
    {"small-operators", "anomaly-mode", always},
    {"small-operators", "python-loop", inner_loop_of_steps},
    {"torch-operator", "embedding-dense-grad", embedding_backward_op},
    {"small-operators", "torch-profiler", always},
    {"small-operators", "module-hooks", always},
    {"torch-operator", "anomaly-mode", always},
    {"data-loading", "python-loop", collate_loop},
    {"gemm-shape", "python-loop", product_in_loop},
    {"matrix-vector", "python-loop", product_in_loop},
    {"python-loop", "optimizer-update", same_routine},
    {"optimizer-update", "small-operators", torch_optim_update}};

void take_explained_out(std::vector<std::pair<std::size_t, Candidate>>& all) {
  for (const Explained& e : kExplained) {
    for (auto& [i, c] : all) {
      if (c.rule != e.rule || c.est_gain_s == 0) continue;
      auto by = std::find_if(all.begin(), all.end(), [&](const auto& x) {
        return x.second.rule == e.by && e.applies(x.second, c);
      });
      if (by == all.end()) continue;
      c.est_gain_s = 0;
      c.gain_bound = fmt::format(
          "none until the {} candidate{} is acted on: these figures were measured under its "
          "cause; measure again after it",
          e.by, by->second.location == "run" ? "" : fmt::format(" ({})", by->second.location));
    }
  }
}

}  // namespace

// A candidate of a routine that made none of its calls in the training loop's iterations: a
// red-team run's one-off dataset build (a python-loop candidate, 0.317 s) ranked between two
// per-step costs of a 30-step profile, nothing saying it would not grow with the steps.
void say_outside_the_loop(const AdviceInput& in, Candidate& c) {
  const Breakdown& b = in.breakdown;
  if (!c.routine_id || !b.found || b.inference || b.iterations <= 0) return;
  auto r = std::find_if(in.metrics.routines.begin(), in.metrics.routines.end(),
                        [&](const RoutineMetrics& m) { return m.routine_id == *c.routine_id; });
  // The loop's own frame (and the body holding its steps) runs the iterations, not in them.
  if (r == in.metrics.routines.end() || r->calls <= 0 || r->name == b.loop || r->name == b.body)
    return;
  auto in_loop = b.loop_calls.find(*c.routine_id);
  std::int64_t calls = in_loop == b.loop_calls.end() ? 0 : in_loop->second;
  c.evidence.emplace_back("calls_in_loop", calls);
  if (calls > 0) return;
  // On a thread with no loop (a threaded prefetcher's, per batch): beside the loop, growing
  // with the steps (a red team's loader thread's avg_pool2d, 180 calls in 60 steps and 360 in
  // 120, was said not to grow with them).
  if (auto beside = b.left_out_calls.find(*c.routine_id);
      beside != b.left_out_calls.end() && beside->second > 0) {
    c.evidence.emplace_back("calls_on_other_threads", beside->second);
    c.summary += fmt::format(
        "; {} on threads with no training loop (a loading or helper thread), beside the "
        "loop's {} iterations, not in them",
        beside->second == r->calls
            ? fmt::format("all its {} calls ran", r->calls)
            : fmt::format("{} of its {} calls ran", beside->second, r->calls),
        b.iterations);
    return;
  }
  c.summary += fmt::format(
      "; {} outside the training loop's {} iterations (set-up, an evaluation, teardown): a "
      "cost that does not grow with the steps",
      r->calls == 1 ? std::string("its one call ran")
                    : fmt::format("all its {} calls ran", r->calls),
      b.iterations);
}

std::vector<Candidate> evaluate_rules(const AdviceInput& input, std::span<const Rule> rule_table) {
  std::vector<std::pair<std::size_t, Candidate>> all;
  for (std::size_t i = 0; i < rule_table.size(); ++i)
    for (auto& c : rule_table[i].evaluate(input, rule_table[i])) all.emplace_back(i, std::move(c));
  for (auto& [i, c] : all) say_outside_the_loop(input, c);
  take_explained_out(all);
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    if (a.second.est_gain_s != b.second.est_gain_s)
      return a.second.est_gain_s > b.second.est_gain_s;
    return a.first < b.first;  // then each rule's own ranking
  });
  std::vector<Candidate> out;
  for (auto& [i, c] : all) {
    // The GPU and rank rules remove waiting or copying: their own time is the limit.
    if (c.gain_bound.empty())
      c.gain_bound = "at most the time the candidate names; no calibrated limit applies";
    out.push_back(std::move(c));
  }
  return out;
}

std::vector<Candidate> compute_candidates(const ProfileFile& file) {
  return evaluate_rules(load_advice_input(file), rules());
}

std::vector<Candidate> compute_candidates(LoadedProfile& profile) {
  return evaluate_rules(load_advice_input(profile), rules());
}

}  // namespace sonde::analyzers
