#include "metrics/breakdown_roles.hpp"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "profile/line_costs.hpp"
#include "profile/profile_file.hpp"
#include "sonde/routine_kinds.hpp"

namespace sonde::analyzers {
namespace {

constexpr std::array<PhaseClass, kPhaseCount> kClasses{{
    {"t_io", "data loading"},
    {"t_h2d", "host-to-device copies"},
    {"t_f", "forward"},
    {"t_b", "backward"},
    {"t_u", "update"},
    {"t_comm", "communication"},
}};

// Words of a user region's name (sonde_region_begin): the user said what the region is. Python
// functions are never matched by words (functools.update_wrapper is no update).
using Words = std::span<const std::string_view>;
constexpr std::string_view kIoWords[] = {"data",  "dataset",  "load",    "loader", "read",
                                         "fetch", "prefetch", "collate", "batch",  "batches",
                                         "io",    "input",    "inputs"};
constexpr std::string_view kH2dWords[] = {"h2d", "htod"};
constexpr std::string_view kForwardWords[] = {"forward", "fwd", "loss", "predict", "inference"};
constexpr std::string_view kBackwardWords[] = {"backward", "bwd", "backprop", "gradient",
                                               "gradients"};
constexpr std::string_view kUpdateWords[] = {"update", "optimizer", "optimiser", "adam", "sgd"};
constexpr std::string_view kCommWords[] = {"comm", "allreduce", "allgather", "broadcast",
                                           "communicate"};
constexpr std::array<Words, kPhaseCount> kRegionWords{kIoWords,       kH2dWords,    kForwardWords,
                                                      kBackwardWords, kUpdateWords, kCommWords};

Role region_role(const std::string& name) {
  std::vector<std::string> words = words_of(name);
  for (int p = 0; p < kPhaseCount; ++p)
    for (const std::string& w : words)
      if (std::find(kRegionWords[p].begin(), kRegionWords[p].end(), w) != kRegionWords[p].end())
        return {p, p == kForward || p == kBackward || p == kUpdate, false, true};
  return {};
}

bool in(std::string_view file, std::string_view part) {
  return file.find(part) != std::string_view::npos;
}

template <std::size_t N>
bool one_of(const std::string& fn, const std::array<std::string_view, N>& names) {
  return std::find(names.begin(), names.end(), fn) != names.end();
}

// PyTorch's own entry points, by the file they live in (torch/nn/modules/module.py, ...).
Role torch_role(const std::string& file, const std::string& fn) {
  if (in(file, "torch/nn/modules/module.py")) {
    if (one_of(fn, std::array<std::string_view, 3>{"_call_impl", "_wrapped_call_impl", "__call__"}))
      return {kForward, true};
    if (fn == "zero_grad") return {kUpdate, false};
    return {};
  }
  if (in(file, "torch/nn/functional.py")) return {kForward, false};  // F.cross_entropy
  if (in(file, "torch/_tensor.py") && fn == "backward") return {kBackward, true};
  if (in(file, "torch/autograd/__init__.py") && (fn == "backward" || fn == "grad"))
    return {kBackward, true};
  if (in(file, "torch/nn/utils/clip_grad.py")) return {kUpdate, false};
  // A scheduler wraps the optimizer's step in its own wrapper (with_counter in 1.x,
  // patch_track_step_called in 2.x): that wrapper is then the update's entry, and counts. Left
  // uncounted, it hid the step beneath it, and gradient accumulation read its backward passes
  // as iterations (384 for 96 steps) with t_u 0 (a red-team find); its step() and get_lr() are
  // update time, once per iteration or epoch.
  if (in(file, "torch/optim/lr_scheduler.py")) return {kUpdate, fn == "wrapper"};
  if (in(file, "torch/optim/")) {
    if (fn == "zero_grad") return {kUpdate, false};
    // Optimizer.step and the wrappers torch/optim/optimizer.py puts around it (profile_hook_step's
    // wrapper, _use_grad) count; what an optimizer's __init__ runs once does not.
    if (one_of(fn, std::array<std::string_view, 3>{"step", "wrapper", "_use_grad"}))
      return {kUpdate, true};
    // The functional adam()/sgd() beneath a step that ran a closure (Lightning's
    // optimizer.step(closure)): update time, never an iteration of its own.
    return {kUpdate, false};
  }
  // AMP's GradScaler.update, after each scaler.step(optimizer): update time, the step counts.
  if (in(file, "grad_scaler.py") && fn == "update") return {kUpdate, false};
  if (in(file, "torch/utils/data/dataloader.py") && (fn == "__next__" || fn == "__iter__"))
    return {kIo, false};
  if (in(file, kTorchCommFile)) return {kComm, false};
  return {};
}

// Chainer's kind (define-by-run, an updater whose update() runs forward, backward and the
// optimizer) and plain scripts: the methods forward, backward and update by name. The standard
// library and third-party packages other than Chainer are left out (tqdm's update is a
// progress bar, collections.Counter.update a dictionary), torch too: its entries are named
// above, and its other methods of those names are no phase (nn.ModuleDict.update, a dictionary
// method that ModuleDict's constructor calls, counted as one optimizer step: a model built with
// one read 200 iterations at t_f and t_u 0 for its 50 steps of gradient accumulation).
bool packaged(const std::string& file) {
  return in(file, "/site-packages/") || in(file, "/dist-packages/");
}

bool names_mean_phases(const std::string& file) {
  if (packaged(file)) return in(file, "/chainer/");
  return !in_stdlib(file);
}

Role python_role(const CallNode& n) {
  std::string fn = function_part(n.name);
  // A module's or a class's body runs once, at import (classes are CamelCase by PEP 8).
  if (fn.empty() || fn == "<module>" || std::isupper(static_cast<unsigned char>(fn[0]))) return {};
  if (Role r = torch_role(n.file, fn); r.phase >= 0) return r;
  if (in(n.file, "chainer/link.py") && fn == "__call__") return {kForward, true};
  if ((in(n.file, "chainer/iterators/") && (fn == "__next__" || fn == "next")) ||
      in(n.file, "chainer/dataset/convert.py"))
    return {kIo, false};
  if (!names_mean_phases(n.file)) return {};
  bool own = !packaged(n.file);  // chainer's methods are its own, not guesses
  if (fn == "forward") return {kForward, true, false, false, own};
  if (fn == "backward") return {kBackward, true, false, false, own};
  if (names_an_update(fn)) return {kUpdate, true, false, false, own};
  if (fn == "cleargrads" || fn == "zerograds") return {kUpdate, false};
  return {};
}

}  // namespace

std::span<const PhaseClass> phase_classes() { return kClasses; }

PhaseMapping parse_phase_mapping(std::string_view text) {
  auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == text.size())
    throw Error(fmt::format("--phase wants CLASS=GLOB (e.g. t_io=next_batch), not '{}'", text), 2);
  std::string id(text.substr(0, eq));
  bool known = std::any_of(kClasses.begin(), kClasses.end(),
                           [&](const PhaseClass& c) { return c.id == id; });
  if (!known) {
    std::string ids;
    for (const PhaseClass& c : kClasses) ids += (ids.empty() ? "" : ", ") + std::string(c.id);
    throw Error(fmt::format("unknown phase class '{}' (one of {})", id, ids), 2);
  }
  return {id, std::string(text.substr(eq + 1))};
}

// "update_core_cpu" -> update, core, cpu; "loadBatch" -> load, batch; "h2d" stays one word.
std::vector<std::string> words_of(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  auto push = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (std::size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (!std::isalnum(c)) {
      push();
      continue;
    }
    if (std::isupper(c) && i > 0 && std::islower(static_cast<unsigned char>(name[i - 1]))) push();
    cur += static_cast<char>(std::tolower(c));
  }
  push();
  return out;
}

bool names_an_update(std::string_view function_name) {
  static constexpr std::string_view kOptimizers[] = {
      "adam",    "adamw",    "sgd",  "optimizer", "optimiser", "optim",    "rmsprop",
      "adagrad", "adadelta", "lamb", "lion",      "lbfgs",     "momentum", "nesterov"};
  // What an update changes or how it is said (apply_update, update_core_cpu, AdamRule.update,
  // torch.optim's _single_tensor_adam and its region Optimizer.zero_grad#SGD.zero_grad).
  static constexpr std::string_view kObjects[] = {
      "apply",     "do",         "param",   "params", "parameter", "parameters",
      "weight",    "weights",    "w",       "grad",   "grads",     "gradient",
      "gradients", "zero",       "model",   "net",    "network",   "theta",
      "core",      "cpu",        "gpu",     "rule",   "all",       "train",
      "training",  "fused",      "foreach", "single", "multi",     "tensor",
      "tensors",   "functional", "impl",    "one",    "manual",    "custom"};
  auto among = [](std::span<const std::string_view> set, const std::string& w) {
    return std::find(set.begin(), set.end(), w) != set.end();
  };
  bool update = false, optimizer = false;
  for (const std::string& w : words_of(function_name)) {
    if (w == "update") {
      update = true;
    } else if (among(kOptimizers, w)) {
      optimizer = true;
    } else if (w != "step" && !among(kObjects, w)) {
      return false;  // an update of something else, or no update
    }
  }
  return update || optimizer;  // `step` alone: an environment's, a scheduler's
}

// "<frozen ...>", "<string>", or a path with a "/python3.N/" part (/usr/lib/python3.11/...); no
// regex: this runs for every Python frame of a profile.
bool in_stdlib(const std::string& file) {
  if (file.starts_with("<")) return true;
  for (auto at = file.find("/python3."); at != std::string::npos;
       at = file.find("/python3.", at + 1)) {
    std::size_t i = at + 9, digits = 0;
    while (i < file.size() && std::isdigit(static_cast<unsigned char>(file[i]))) ++i, ++digits;
    if (digits > 0 && i < file.size() && file[i] == '/') return true;
  }
  return false;
}

bool torch_step_wrapper(const CallNode& n, bool use_grad) {
  static const SharedText python(kinds::kPython);  // interned: a pointer's comparison, per node
  if (n.kind != python || !n.file.ends_with("torch/optim/optimizer.py")) return false;
  return n.name.ends_with("(wrapper)") || (use_grad && n.name.ends_with("(_use_grad)"));
}

bool user_file(const std::string& file) { return !packaged(file) && !in_stdlib(file); }

bool is_user_frame(const CallNode& n) {
  if (n.kind == kinds::kRegion) return true;
  return n.kind == kinds::kPython && user_file(n.file);
}

bool is_import_frame(const CallNode& n) {
  return n.kind == kinds::kPython && n.name.starts_with("<frozen importlib");
}

bool mapping_matches(const PhaseMapping& m, const std::string& name) {
  return fnmatch(m.glob.c_str(), name.c_str(), 0) == 0 ||
         fnmatch(m.glob.c_str(), function_part(name).c_str(), 0) == 0;
}

Role role_of(const CallNode& n, const std::vector<PhaseMapping>& mappings) {
  for (const PhaseMapping& m : mappings) {
    if (!mapping_matches(m, n.name)) continue;
    for (int p = 0; p < kPhaseCount; ++p)
      if (kClasses[p].id == m.id)
        return {p, p == kForward || p == kBackward || p == kUpdate, false, true};
  }
  if (n.kind == kinds::kMpi || n.kind == kinds::kNccl) return {kComm, false, true};
  // torch.distributed's process-group calls (wrappers/torch: library c10d).
  if (n.kind == kinds::kTorch && n.where == "c10d") return {kComm, false, true};
  if (n.kind == kinds::kCuda && in(n.name, "HtoD")) return {kH2d, false, true};
  if (n.kind == kinds::kRegion) return region_role(n.name);
  if (n.kind == kinds::kPython && !is_import_frame(n)) return python_role(n);
  return {};
}

}  // namespace sonde::analyzers
