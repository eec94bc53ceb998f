// What the python-loop rule knows from the calling-context trees: the Python functions of the
// program's own that call torch operators or numpy functions of a few microseconds each, many
// times per call of their own (a loop over elements, rows or pairs), and the backward pass's
// autograd nodes those operators left behind.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "profile/call_tree.hpp"

namespace sonde::analyzers {

// Calls under this mean time cost their calling more than their work: an ATen operator on a
// few elements, a numpy reduction of a row (1-3 us a call under sonde here). torch-operator
// tells such an operator to be called less.
inline constexpr std::int64_t kSmallCallNs = 20'000;
// A loop's small calls: under this mean time, which leaves room for a host whose other programs
// stretch each call (a GRUCell's step, 13-17 us quiet, read 25 us beside two busy loops on 2
// cores). A GEMM of 64 x 64 x 64 takes about 10 us.
inline constexpr std::int64_t kLoopCallNs = 50'000;
// A loop's least calls of one small call per call of its function (per step, in a training
// loop): fewer is a function's few calls, not a loop over elements.
inline constexpr double kMinPerCall = 32;

// One Python function of the program's own, summed over its nodes (threads, call paths).
struct OpLoop {
  std::string site;  // routines.name: "train.py:11(masked_loss)"
  std::int64_t routine_id = 0;
  std::string caller;  // the routine above its largest node
  std::int64_t site_calls = 0;
  std::int64_t own_ns = 0;  // its own time: the interpreter running the loop's body
  // Its direct small calls: torch operators, numpy's or torch's Python functions, BLAS calls
  // made from Python (numpy's `@`), and helpers of the program's own with such calls beneath
  // them, each under kLoopCallNs on average.
  std::int64_t small_calls = 0, small_ns = 0;
  // The bound a small call's mean stayed under: kLoopCallNs, stretched as the run's calls were.
  std::int64_t small_bound_ns = 0;
  // The most calls one of them makes per call of the site: 1-3 in a model's forward, thousands
  // in a loop over elements.
  double max_per_call = 0;
  bool numpy = false, torch = false;  // what the small calls are
  bool blas = false;  // BLAS products among them, called from Python (numpy's `@` on small arrays)
  // A child that is a training step's backward or optimizer step: the training loop itself,
  // whose iterations are no loop to vectorise.
  bool step = false;
  // Where it is the training loop: the steps (its step children's calls), and its figures are
  // those of the small calls it makes many times in each step alone, a loop inside the loop (a
  // loss summed per sample, clip_grad_norm_ per parameter: a red team's, 87 % and 38 % of their
  // loops, read "no rule fired"); its own time is left out, the outer loop's with it. 0: none.
  std::int64_t steps = 0;
  // The small calls by name (the three with most calls, for the advice), and every ATen
  // operator's calls (for its backward's share).
  std::vector<std::pair<std::string, std::int64_t>> top;
  std::map<std::string, std::int64_t> aten_calls;
  // The outermost ATen operators in its small calls (beneath nn.Module calls and helpers too):
  // a torch-operator candidate of one of them is the loop's time.
  std::set<std::string> operators;
  // Its small calls are nn.Module calls (a stack of small layers, module.py's _call_impl), or
  // step a recurrent cell (aten::gru_cell, ...): loops over steps that depend on each other,
  // whose remedy is a fused layer or a compiler, not one operation over whole tensors.
  std::int64_t module_calls = 0;
  bool recurrent = false;
  // Their backward: the autograd nodes of its operators (SelectBackward0 of aten::select), each
  // under kLoopCallNs, in the share of those operators' calls that the site made.
  std::int64_t backward_ns = 0, backward_calls = 0;
};

// Every Python function of the program's own with small calls beneath it, largest small_ns
// first; the rule judges them. `stretch`: how much longer than their work the run's calls took
// for want of a core (call_stretch), by which the small calls' bounds grow.
std::vector<OpLoop> op_loops(const std::vector<ThreadTree>& threads, double stretch = 1);

// A BLAS matrix-vector product (cblas_sgemv, dgemv_) by the routine that calls it: one vector
// at a time, each call reads the whole matrix (numpy's x @ W for a single row x).
struct MatrixVectorSite {
  std::string routine, caller;
  std::string caller_file;  // routines.file of a Python caller
  std::int64_t routine_id = 0;
  std::int64_t calls = 0, ns = 0;
  std::int64_t caller_calls = 0;  // the caller's calls on the paths that made them
  double flops = 0;
};

// Every (GEMV routine, calling routine) pair of the trees, largest time first.
std::vector<MatrixVectorSite> matrix_vector_sites(const std::vector<ThreadTree>& threads);

// "SelectBackward0" -> "select", "LogSoftmaxBackward0" -> "log_softmax": the forward operator
// an autograd node is the backward of, where the names follow PyTorch's convention ("" if not).
std::string forward_op_of(std::string_view backward_node);

}  // namespace sonde::analyzers
