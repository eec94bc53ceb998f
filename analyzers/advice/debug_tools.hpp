// What the debug-tool rules know: PyTorch's debugging aids left on in a training run, each
// costing every operator, which no other rule names because no one operator is slow.
// - Anomaly mode (torch.autograd.set_detect_anomaly(True), detect_anomaly()): every operator
//   of the forward stores the Python stack of its call (traceback.format_stack, called from
//   the operator), and every node of the backward checks its outputs for NaN (aten::isnan and
//   aten::any beneath autograd's evaluate_function). A red-team MLP ran 2.8 times slower with
//   it on; no rule fired.
// - The PyTorch profiler (torch.profiler.profile, torch.autograd.profiler.profile) around the
//   loop: its frames (collecting, parsing its events at exit) are its measured cost, beside
//   what it adds inside every operator. A red-team loop under profile(record_shapes=True,
//   with_stack=True) ran 50 times slower; no rule fired.
// - nn.Module hooks (register_forward_hook, register_forward_pre_hook, register_full_backward_
//   hook): run at every call of their module, with the machinery full backward hooks wrap
//   each module's inputs and outputs in. A red-team model's logging hooks cost 42 % of its
//   loop (0.40 of 0.94 s); no rule fired.
#pragma once

#include <cstdint>
#include <string>

#include "profile/profile_file.hpp"

namespace sonde::analyzers {

struct DebugTools {
  // Anomaly mode: the stack records' inclusive time and count (the outermost traceback frame
  // an operator called), and the backward's NaN checks'.
  std::int64_t stack_ns = 0, stacks = 0;
  std::int64_t nan_check_ns = 0, nan_checks = 0;
  // The profiler: its outermost frames' inclusive time and calls, and the routine of the
  // program's that called it the longest.
  std::int64_t profiler_ns = 0, profiler_calls = 0;
  std::string profiler_caller;
  // Module hooks: the frames a module's _call_impl calls besides its forward, and the backward
  // hooks' autograd nodes (BackwardHookFunctionBackward); the program's hook that took longest.
  std::int64_t hook_ns = 0, hook_calls = 0, backward_hook_ns = 0;
  std::string hook;
};

DebugTools load_debug_tools(const ProfileFile& file);

}  // namespace sonde::analyzers
