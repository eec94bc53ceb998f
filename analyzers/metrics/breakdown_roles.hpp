// What a single frame of the calling-context tree is to a training iteration, before any
// structure is looked at: a framework's entry point (PyTorch's Module.__call__, Tensor.backward,
// Optimizer.step, DataLoader.__next__), a user region named for a phase, a copy or collective by
// its kind, or a user's --phase mapping. The structure (which frame repeats them) is breakdown.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "profile/call_tree.hpp"

namespace sonde::analyzers {

// The phases of the Chu deck, in the order they are shown.
enum Phase : int { kIo, kH2d, kForward, kBackward, kUpdate, kComm, kPhaseCount };

struct PhaseClass {
  std::string_view id;     // "t_f"
  std::string_view title;  // "forward"
};
std::span<const PhaseClass> phase_classes();

// A user's addition: routines whose name or function part matches `glob` (fnmatch) belong to
// class `id`; checked before everything else.
struct PhaseMapping {
  std::string id;
  std::string glob;
};
// Parses "t_io=load_*" style arguments; throws Error for an unknown class or a missing '='.
PhaseMapping parse_phase_mapping(std::string_view text);
// Whether a routine of this name belongs to the mapping's class: its glob matches the whole
// name or its function part ("train.py:12(load_batch)": "load_batch").
bool mapping_matches(const PhaseMapping& m, const std::string& name);

// torch.distributed's Python layer (all_reduce, broadcast, barrier, ...): its frames wait on the
// collectives beneath them (Work.wait is no c10d operator), so their time is communication: the
// breakdown's t_comm here, and the rank rules' through the routine_comm view, which names the
// same file (libprof/src/store/store_views.sql).
inline constexpr std::string_view kTorchCommFile = "torch/distributed/distributed_c10d.py";

struct Role {
  int phase = -1;  // a Phase, or -1: no role
  // An entry that starts one per iteration: its calls count iterations. zero_grad, gradient
  // clipping and learning-rate schedulers are update time but not the update's entry.
  bool counts = false;
  // A copy or a collective (by routine kind): its phase wherever it runs, even inside another.
  bool anywhere = false;
  bool user = false;  // a --phase mapping or a user region: wins over framework guesses
  // Guessed from a function's name alone (forward, backward, update outside the frameworks'
  // own files): a metrics class's update() is no optimizer where torch.optim's step runs.
  bool by_name = false;
};

Role role_of(const CallNode& n, const std::vector<PhaseMapping>& mappings);

// A frame of the user's own: a region, or a Python function outside the standard library and
// installed packages.
bool is_user_frame(const CallNode& n);

// torch.optim's step wrapper (torch/optim/optimizer.py's profile_hook_step `wrapper`), around
// every Optimizer's step; with `use_grad`, also the `_use_grad` torch 2's own optimizers' steps
// run in.
bool torch_step_wrapper(const CallNode& n, bool use_grad = false);

// A name's words, lower-cased: "update_core_cpu" -> update, core, cpu; "loadBatch" -> load,
// batch.
std::vector<std::string> words_of(std::string_view name);

// Whether a function's name says it updates a model's parameters: `update` or an optimizer's
// name (adam, sgd, ...), alone or among words of a step or of what an update changes
// (adam_update, sgd_step, update_params, apply_update, update_core_cpu, optimizer-step), never an
// update of something else (update_progress, update_centroids, update_lr) nor an optimizer's set-up
// (build_optimizer). The breakdown's update entry and optimizer-update's phases both read it: until
// 2026-12-07 the rule took `adam_update` for the update and the breakdown, wanting `update`
// exactly, put its time in `other`.
bool names_an_update(std::string_view function_name);

// A file of the interpreter's standard library (or "<frozen ...>", "<string>").
bool in_stdlib(const std::string& file);
// A file of the program's own: neither the standard library's nor an installed package's.
bool user_file(const std::string& file);

// Import machinery: nothing run by an import belongs to an iteration.
bool is_import_frame(const CallNode& n);

}  // namespace sonde::analyzers
