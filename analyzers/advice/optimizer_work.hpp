// What the optimizer-update rule knows of each optimizer-like phase from the calling-context
// trees: how much of its time is the parameter update, and how much is other work it calls.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profile/call_tree.hpp"

namespace sonde::analyzers {

// Per optimizer-like phase (by name), summed over its outermost occurrences.
struct OptimizerWork {
  // The nearest other optimizer-like phases called beneath it (update() -> update_core_cpu()).
  std::int64_t inner_ns = 0;
  // Phases beneath it that are not on the way to an optimizer-like phase: no optimizer-like
  // phase above them closer than this one, none beneath them. Chainer's
  // Optimizer.update(lossfun) calls the loss (forward) and backward() before the parameters'
  // update(): with inner phases present, that is other work, not the update's.
  std::int64_t other_ns = 0;
  std::int64_t other_blas_ns = 0;  // the outermost BLAS/oneDNN calls in that other work
  // The step of an optimizer of the program's own (a torch.optim.Optimizer subclass in its
  // files or a package's): the Python frame torch.optim's step wrapper calls, whatever its
  // name says (a Lion's or LAMB's step).
  bool torch_step = false;
  // torch._foreach_* operators run beneath it (aten::_foreach_*): its loop is already over
  // whole parameter lists, and advice to write it so was wrong (a red-team foreach Lion).
  bool foreach = false;
  // The outermost aten:: operators beneath it: calls, and those not in place (no trailing _:
  // aten::mul against aten::mul_). An EMA of mul_ and add_ is in place already, and was told to
  // write it so (a red-team find).
  std::int64_t op_calls = 0, out_of_place_calls = 0;
};

// A region or Python frame named like an optimizer (looks_like_optimizer).
bool optimizer_phase(const CallNode& node);

// Every optimizer-like phase of the trees, named like one or a torch.optim.Optimizer
// subclass's own step (OptimizerWork::torch_step), with what it knows of each.

std::map<std::string, OptimizerWork> optimizer_work(const std::vector<ThreadTree>& threads);

}  // namespace sonde::analyzers
