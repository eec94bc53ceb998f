#include "torch_names.hpp"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string_view>

#include "sonde/routine_kinds.hpp"
#include "torch_comm.hpp"

namespace sonde::torch_ops {
namespace {

constexpr size_t kSlots = 4096;  // a power of two; a training run has a few hundred names

struct Slot {
  std::atomic<uint64_t> hash{0};  // 0: empty; written last, so a reader sees a complete slot
  const char* text = nullptr;
  bool user_scope = false;
  OpName op;
};

std::array<Slot, kSlots> g_slots;
std::mutex g_insert;
std::atomic<bool> g_full{false};
std::atomic<uint64_t> g_refused{0};

// Every record_function range (`ProfilerStep#12`, a name per iteration) is one of these: they
// are never interned, so they cannot fill the table that operators need.
const OpName kIgnoredScope{0, Role::kIgnored, 0};

uint64_t fnv1a(const char* s, bool user_scope) {
  uint64_t h = 1469598103934665603ull ^ uint64_t(user_scope);
  for (; *s != '\0'; ++s) h = (h ^ uint8_t(*s)) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

bool starts(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

Role role_of(std::string_view name, bool user_scope) {
  if (user_scope) {
    // Process-group work (ProcessGroup::Work's profiling title); any other user scope is a
    // record_function range, which the Python hook already records as a region.
    for (std::string_view p : {"gloo:", "nccl:", "mpi:", "ucc:"})
      if (starts(name, p)) return Role::kTransfer;
    return Role::kIgnored;
  }
  if (!starts(name, "c10d::")) return Role::kOperator;
  for (std::string_view p : {"c10d::send", "c10d::recv_"})
    if (starts(name, p)) return Role::kP2P;
  return Role::kCollective;
}

const OpName* insert(const char* name, bool user_scope, uint64_t h) {
  // Full: refused without the lock, so a program of many names does not queue its threads on it.
  if (g_full.load(std::memory_order_relaxed)) {
    g_refused.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_insert);
  for (size_t i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[(h + i) & (kSlots - 1)];
    uint64_t seen = s.hash.load(std::memory_order_acquire);
    if (seen == h && s.user_scope == user_scope && std::strcmp(s.text, name) == 0) return &s.op;
    if (seen != 0) continue;
    s.text = strdup(name);  // once per distinct name, for the life of the process
    if (s.text == nullptr) return nullptr;
    s.user_scope = user_scope;
    s.op.role = role_of(name, user_scope);
    s.op.operation = operation_key(name);
    s.op.engine = !user_scope && starts(name, "autograd::engine::evaluate_function: ");
    s.op.dispatched =
        !user_scope && !s.op.engine && std::string_view(name).find("::") != std::string_view::npos;
    s.op.may_pass = s.op.dispatched && s.op.role == Role::kOperator && starts(name, "aten::") &&
                    std::strcmp(name, "aten::_backward") != 0;
    s.op.text = s.text;
    bool comm = s.op.role == Role::kCollective || s.op.role == Role::kP2P;
    // User scopes are never frames: no routine for them in the profile.
    if (!user_scope) s.op.id = register_routine({s.text, kinds::kTorch, comm ? "c10d" : "torch"});
    s.hash.store(h, std::memory_order_release);
    return &s.op;
  }
  g_full.store(true, std::memory_order_relaxed);
  g_refused.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

}  // namespace

const OpName* op_name(const char* name, bool user_scope) {
  if (name == nullptr) return nullptr;
  if (user_scope && role_of(name, true) == Role::kIgnored) return &kIgnoredScope;
  uint64_t h = fnv1a(name, user_scope);
  for (size_t i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[(h + i) & (kSlots - 1)];
    uint64_t seen = s.hash.load(std::memory_order_acquire);
    if (seen == 0) break;
    if (seen == h && s.user_scope == user_scope && std::strcmp(s.text, name) == 0) return &s.op;
  }
  return insert(name, user_scope, h);
}

uint64_t names_refused() { return g_refused.load(std::memory_order_relaxed); }

void passing_operators(void (*fn)(const char* name, void* ctx), void* ctx) {
  for (const Slot& s : g_slots)
    if (s.hash.load(std::memory_order_acquire) != 0 && s.op.passes.load(std::memory_order_relaxed))
      fn(s.text, ctx);
}

int64_t dtype_bytes(const char* type) {
  static constexpr std::pair<std::string_view, int64_t> kSizes[] = {{"float", 4},
                                                                    {"double", 8},
                                                                    {"c10::Half", 2},
                                                                    {"c10::BFloat16", 2},
                                                                    {"long int", 8},
                                                                    {"int", 4},
                                                                    {"short int", 2},
                                                                    {"signed char", 1},
                                                                    {"unsigned char", 1},
                                                                    {"bool", 1},
                                                                    {"c10::complex<float>", 8},
                                                                    {"c10::complex<double>", 16},
                                                                    {"c10::complex<c10::Half>", 4}};
  if (type == nullptr) return 0;
  std::string_view t(type);
  for (const auto& [name, bytes] : kSizes)
    if (t == name) return bytes;
  if (starts(t, "c10::Float8")) return 1;
  return 0;
}

}  // namespace sonde::torch_ops
