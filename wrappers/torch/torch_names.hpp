// RecordFunction names as sonde routines. A name's text is all sonde has to go on (autograd and
// user-scope names are strings built per call, so their pointers change): the table is looked up
// by content, without a lock; a name seen for the first time is copied and registered once.
#pragma once

#include <atomic>
#include <cstdint>

#include "sonde/probe.hpp"

namespace sonde::torch_ops {

// What an event is to sonde, decided once per name.
enum class Role : uint8_t {
  kOperator,    // an ATen operator or autograd node: a frame of kind `torch`
  kCollective,  // c10d::allreduce_, broadcast_, barrier, ...: a frame and a comm op
  kP2P,         // c10d::send, recv_, recv_any_source_
  kTransfer,    // a backend's own event (gloo:all_reduce, nccl:..., mpi:..., ucc:...)
  kIgnored,     // a user scope that is a record_function range (the Python hook's region)
};

struct OpName {
  RoutineId id = 0;  // none for user scopes, which are never frames
  Role role = Role::kOperator;
  uint32_t operation = 0;  // torch_comm.hpp's operation_key, for communication
  // The autograd engine's `autograd::engine::evaluate_function: <node>` event: the operators it
  // runs outside the node itself (a gradient accumulated, summed to its input's shape, a hook's)
  // are called by the engine, not by an operator, so they are top-level beneath it.
  bool engine = false;
  // A dispatcher operator's namespaced name (aten::, prim::, a custom library's), where the
  // Python code it runs is its implementation (a tensor subclass's __torch_dispatch__, a Python
  // kernel): the events beneath it, a custom Function it applies included, stay the operator's
  // own, as torch.profiler counts one call there. Other events that run Python (a custom
  // autograd.Function's, the JIT's `forward`) do not.
  bool dispatched = false;
  // An ATen operator (aten::, never aten::_backward, which runs the autograd engine) whose
  // own events may pass unobserved (torch_observer.cpp): what its first calls were seen to make
  // decides, once, whether it does.
  bool may_pass = false;
  const char* text = nullptr;  // the name, interned (for the count of unmatched transfers)
  mutable std::atomic<uint32_t> sampled{0};  // top-level calls whose own events were counted
  mutable std::atomic<uint64_t> nested{0};   // those events
  mutable std::atomic<bool> passes{false};
};

// The routine of `name` for events of this scope (true: USER_SCOPE; a record_function range is
// kIgnored, never interned). nullptr when the table is full (4,096 distinct names) or `name` is
// null: the event is then not recorded, and counted (names_refused, a note at the end).
const OpName* op_name(const char* name, bool user_scope);
uint64_t names_refused();
// The operators whose own events pass unobserved, each once.
void passing_operators(void (*fn)(const char* name, void* ctx), void* ctx);

// Bytes per element of a dtype as torch::profiler::impl::inputTypes names it (caffe2's TypeMeta
// names: "float", "c10::Half", "long int", ...); 0 when unknown.
int64_t dtype_bytes(const char* type);

}  // namespace sonde::torch_ops
