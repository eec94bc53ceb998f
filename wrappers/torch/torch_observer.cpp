// The tree torch adds: every top-level ATen operator (one called by Python or by an autograd
// node, not by another operator) and every autograd node is a frame of kind `torch` between the
// Python frame that ran it and the library calls beneath it; the operators an operator calls
// are its own business, as they are in torch.profiler's top-level view. Python code that an
// event other than a dispatcher operator runs (a custom autograd.Function's forward, a
// checkpointed layer's) calls operators from Python all the same: those are top-level beneath
// its frames (OpName::dispatched says why a tensor subclass's __torch_dispatch__ is not).
// Process-group calls (c10d::*) are frames wherever they run (DDP's all-reduce runs inside an
// autograd hook) and comm ops; their bytes come from the backend's own work event (gloo:all_reduce,
// nccl:...), which has the tensors' sizes and dtypes, paired with the call it belongs to
// (torch_comm.hpp).
#include "torch_observer.hpp"

#include <array>
#include <cstdint>

#include "core/per_thread.hpp"
#include "torch_comm.hpp"
#include "torch_names.hpp"
#include "torch_shapes.hpp"

namespace sonde::torch_ops {

Reader g_reader;
std::atomic<bool> g_recording{false};
std::atomic<int> g_group_size{0};
std::atomic<bool> g_pass_nested{false};

namespace {

using torch_abi::Scope;

// Completed backend work, process-wide: a work item's event ends on the thread that finishes it.
std::atomic<uint64_t> g_completed{0};
// When the latest of them ended, written before the count: a thread sees its work completed
// only at its next operator, and an operation ended there read in flight until then (a red-team
// all_reduce posted before a 0.1 s matmul read 1.03 s in flight where it took 0.15 s).
std::atomic<uint64_t> g_completed_at{0};

// An operator's own events (aten::bmm's select and as_strided per matrix, 1,152 a call for 128
// small ones; aten::lstm's per step) are never frames: they are its implementation. Each still
// builds libtorch's RecordFunction state and calls sonde's callbacks, about 130 ns here, which
// the operator's time then holds: a red team's aten::bmm read 305 us a call, 160 us without
// sonde. An operator whose first kSampled top-level calls made at least kPassAt events each on
// average then runs with this thread's RecordFunction off (at::enableRecordFunction), and on
// again at its end: one switch costs about 0.5 us (libtorch rebuilds the thread's callback
// lists), so an operator of a few events (aten::linear's t and addmm) is not worth it. Never
// while this thread has callbacks of its own (torch.profiler's, emit_nvtx's), which would miss
// the events; the operators that pass are named in a note.
constexpr uint32_t kSampled = 4;

constexpr uint32_t kMaxDepth = 128;
// c10d calls of one thread waiting for their work's event (gloo runs its queue behind the
// caller): hand-written data parallelism posts one async all_reduce per parameter before it
// waits (74 for a 6-layer TransformerEncoder, hundreds for an LLM). At 64, a red-team run's
// oldest calls were settled without bytes while their events were still coming, and each later
// call took its predecessor's bytes (30 % of them lost at 200 in flight).
constexpr uint32_t kMaxPending = 1024;

// Calls settled without bytes because more than kMaxPending waited on one thread.
std::atomic<uint64_t> g_pending_overflow{0};

struct Entry {
  ThreadState* thread = nullptr;  // the frame opened, or nullptr
  const OpName* op = nullptr;
  uint32_t saved_function_depth = 0;  // restored at its end: a backward node's, ...
  bool restores = false;              // ... and an operator's that Python code called
  // Inside a dispatcher operator's implementation (OpName::dispatched), however many events
  // down: Python there is the operator's own, and calls nothing top-level. An autograd node's
  // formula unseals.
  bool sealed = false;
  // The thread's innermost Python frame when it started (libsonde's interpreter_frame, which
  // the Python hook reads whether or not it records frames): nullptr where Python never ran.
  const void* python = nullptr;
  uint32_t node = 0;  // a c10d frame's, for its bytes told later
  uint64_t start = 0;
  uint64_t bytes = 0;  // told by the backend's event when it starts inside the c10d call
  bool bytes_known = false;
  uint32_t signature = 0;      // `--record-shapes`: the operator's inputs (node and start set too)
  uint64_t posted_before = 0;  // a c10d call's: backend events posted before it started
  uint64_t events_before = 0;  // the thread's events started before it, when `sampling`
  bool sampling = false;       // its own events are counted (OpName::sampled)
  bool passing = false;        // it turned this thread's RecordFunction off
};

// A c10d call closed before its backend's event told its bytes (gloo). `thread` nullptr: a call
// not measured, kept all the same so that its event pairs with it and with no other.
struct Pending {
  ThreadState* thread = nullptr;
  const OpName* op = nullptr;
  uint32_t node = 0;
  uint64_t ticks = 0;
  // Events posted before the call started are not its own (a failed call of the operation after
  // an all_to_all_single, which has no call, took that one's bytes).
  uint64_t posted_before = 0;
};

struct Stack {
  uint64_t events = 0;          // FUNCTION and BACKWARD_FUNCTION events started on this thread
  uint32_t depth = 0;           // FUNCTION and BACKWARD_FUNCTION events open on this thread
  uint32_t function_depth = 0;  // operators open since the innermost autograd node
  uint32_t comm_open = 0;       // c10d frames open (a poll must not end their comm call)
  // Work this thread started and has not seen completed, for comm_overlap's in-flight time.
  ThreadState* comm_thread = nullptr;
  int64_t inflight = 0;
  uint64_t completed_seen = 0;
  // A ring, oldest first from pending_head: calls are paired in the order they were made.
  uint32_t pending_head = 0, pending_count = 0;
  std::array<Pending, kMaxPending> pending;
  std::array<Entry, kMaxDepth> entries;

  Pending& waiting(uint32_t i) { return pending[(pending_head + i) % kMaxPending]; }
  const Pending& waiting(uint32_t i) const { return pending[(pending_head + i) % kMaxPending]; }
  // A thread that ends (C++ thread_locals go before libsonde's thread-end key, so its state is
  // still there) settles the calls it made whose events came: a metrics thread's last
  // all_reduce, paired at no later operator of its own, was in no comm op.
  ~Stack();
};

thread_local PerThread<Stack> t_stack;

bool is_comm(const OpName* op) {
  return op != nullptr && (op->role == Role::kCollective || op->role == Role::kP2P);
}

CommCost comm_of(const OpName* op) {
  // The c10d call enqueues the work and returns: the transfer runs on the backend's threads or
  // stream, and the wait is the caller's (Work::wait, the DDP reducer's), which 1.13 does not
  // mark. So each call starts a nonblocking operation.
  return CommCost{op->role == Role::kP2P ? CommKind::kP2P : CommKind::kCollective, false,
                  g_group_size.load(std::memory_order_relaxed)};
}

void settle(const Pending& p, uint64_t bytes) {
  if (p.thread != nullptr) comm_record_late(p.thread, p.node, comm_of(p.op), bytes, p.ticks);
}

void drop_pending(Stack& s, uint32_t i) {
  if (i == 0) {
    s.pending_head = (s.pending_head + 1) % kMaxPending;
  } else {
    for (uint32_t j = i + 1; j < s.pending_count; ++j) s.waiting(j - 1) = s.waiting(j);
  }
  --s.pending_count;
}

bool is_its(const Pending& p, uint32_t key, uint64_t index) {
  return p.op->operation == key && index >= p.posted_before;
}

bool waits_for(uint32_t key, uint64_t index, const void* ctx) {
  const Stack& s = *static_cast<const Stack*>(ctx);
  for (uint32_t i = 0; i < s.pending_count; ++i)
    if (is_its(s.waiting(i), key, index)) return true;
  return false;
}

// Pairs the backend events posted so far with this thread's calls waiting for their bytes; an
// event of another thread's call stays posted for that thread.
void pair_transfers(Stack& s) {
  uint32_t key;
  uint64_t bytes, index;
  while (s.pending_count > 0 && take_transfer(&waits_for, &s, key, bytes, index)) {
    for (uint32_t i = 0; i < s.pending_count; ++i) {
      if (!is_its(s.waiting(i), key, index)) continue;
      settle(s.waiting(i), bytes);
      drop_pending(s, i);
      break;
    }
  }
}

// The calls still waiting, without bytes: their events never came, or will come too late.
void settle_all(Stack& s) {
  while (s.pending_count > 0) {
    settle(s.waiting(0), 0);
    drop_pending(s, 0);
  }
}

void add_pending(Stack& s, const Pending& p) {
  if (s.pending_count == kMaxPending) {  // the oldest, without bytes
    settle(s.waiting(0), 0);
    drop_pending(s, 0);
    g_pending_overflow.fetch_add(1, std::memory_order_relaxed);
  }
  s.waiting(s.pending_count++) = p;
}

Stack::~Stack() {
  if (pending_count == 0 || !g_recording.load(std::memory_order_relaxed)) return;
  await_posting();
  pair_transfers(*this);
  settle_all(*this);
}

// Work completed since this thread last looked, at most what it started, reported on its books.
void poll_completions(Stack& s) {
  if (s.inflight == 0 || s.comm_open != 0) return;
  uint64_t done = g_completed.load(std::memory_order_acquire);
  if (done == s.completed_seen) return;
  int64_t n = std::min<int64_t>(int64_t(done - s.completed_seen), s.inflight);
  s.completed_seen = done;
  s.inflight -= n;
  // Ended when the latest completion came (another thread's, where several were in flight: at
  // most that late), never before the thread's last transition (CommClock keeps its order).
  uint64_t now = probe_now();
  uint64_t at = g_completed_at.load(std::memory_order_relaxed);
  comm_completed(s.comm_thread, at != 0 && at < now ? at : now, int(n));
}

uint64_t bytes_of(const torch_abi::RecordFunction& rf) {
  if (g_reader.input_sizes == nullptr || g_reader.input_types == nullptr) return 0;
  try {
    auto sizes = g_reader.input_sizes(rf, true);
    auto types = g_reader.input_types(rf);
    uint64_t bytes = 0;
    for (size_t i = 0; i < sizes.size() && i < types.size(); ++i) {
      uint64_t n = 1;
      for (int64_t d : sizes[i]) n *= d > 0 ? uint64_t(d) : 0;
      bytes += n * uint64_t(dtype_bytes(types[i].c_str()));
    }
    return bytes;
  } catch (...) {  // an allocation failure in libtorch's helpers: no bytes, never the host's error
    return 0;
  }
}

void on_transfer_start(const torch_abi::RecordFunction& rf, const OpName* op) {
  Stack& s = t_stack.get();
  uint64_t bytes = bytes_of(rf);
  uint32_t d = s.depth;
  if (d > 0 && d <= kMaxDepth && is_comm(s.entries[d - 1].op)) {  // inside its c10d call
    s.entries[d - 1].bytes += bytes;
    s.entries[d - 1].bytes_known = true;
    return;
  }
  post_transfer(op->operation, bytes, op->text);
}

// A top-level operator that may pass its own events: sampled, or passing them.
void pass_or_sample(const Stack& s, Entry& e) {
  if (e.op->passes.load(std::memory_order_relaxed)) {
    if (g_reader.has_thread_local_callbacks()) return;
    g_reader.enable_record_function(false);
    e.passing = true;
  } else if (e.op->sampled.load(std::memory_order_relaxed) < kSampled) {
    e.sampling = true;
    e.events_before = s.events;
  }
}

void sampled(const Entry& e, uint64_t events) {
  uint64_t all = e.op->nested.fetch_add(events, std::memory_order_relaxed) + events;
  if (e.op->sampled.fetch_add(1, std::memory_order_relaxed) + 1 == kSampled &&
      all >= kSampled * kPassAt)
    e.op->passes.store(true, std::memory_order_relaxed);
}

template <Scope S>
void push(const torch_abi::RecordFunction& rf) {
  Stack& s = t_stack.get();
  ++s.events;
  uint32_t d = s.depth++;
  const OpName* op = op_name(g_reader.name(&rf), false);
  bool comm = is_comm(op);
  bool open;
  Entry e;
  e.op = op;
  if (comm) e.posted_before = transfers_posted();
  // The event this one starts inside, where that is an operator (not the top level).
  const Entry* outer = s.function_depth > 0 && d > 0 && d < kMaxDepth ? &s.entries[d - 1] : nullptr;
  if (outer != nullptr) e.sealed = outer->sealed || (outer->op != nullptr && outer->op->dispatched);
  bool node = S == Scope::kBackwardFunction || (op != nullptr && op->engine);
  if (node) e.sealed = false;
  // A custom autograd.Function's event (a name of no namespace: Squash, CheckpointFunction,
  // BackwardHookFunction): autograd's C++ calls operators beneath it after its forward has
  // returned, from no Python of its own (aten::view_as of an output that is an input: a
  // register_full_backward_hook model's 60 of them were in no frame, their time the
  // Function's). They are top-level, as torch.profiler counts them.
  bool function = S == Scope::kFunction && op != nullptr && op->role == Role::kOperator &&
                  !op->dispatched && !op->engine;
  uint32_t depth_before = s.function_depth;
  // Where Python was when it started: another innermost frame, when an operator starts inside
  // it, is Python code it ran. Not read inside a sealed event, whose events are all sealed (most
  // of a model's: aten::linear's aten::t and aten::addmm).
  if (!e.sealed) e.python = interpreter_frame();
  if (node) {
    // An autograd node: the operators its backward formula calls are top-level beneath it; and
    // the engine's evaluate_function around it: so are those the engine calls itself.
    e.saved_function_depth = s.function_depth;
    e.restores = true;
    s.function_depth = 0;
    open = true;
  } else if (outer != nullptr && !e.sealed && e.python != outer->python) {
    // Called by Python code that the event around it runs: top-level, its own operators not.
    e.saved_function_depth = s.function_depth;
    e.restores = true;
    s.function_depth = 1;
    open = true;
  } else {
    open = s.function_depth++ == 0 || comm;
  }
  if (function && open && !e.sealed) {
    if (!e.restores) e.saved_function_depth = depth_before;
    e.restores = true;
    s.function_depth = 0;
  }
  if (s.pending_count != 0) pair_transfers(s);  // also between back-to-back c10d calls
  if (!comm) poll_completions(s);
  if (d >= kMaxDepth) return;
  s.entries[d] = e;
  if (!open || op == nullptr || !g_recording.load(std::memory_order_relaxed)) return;
  if constexpr (S == Scope::kFunction) {
    if (op->may_pass && g_pass_nested.load(std::memory_order_relaxed))
      pass_or_sample(s, s.entries[d]);
  }
  ThreadState* t = probe_open(op->id, Nesting::kChildren);
  if (t == nullptr) return;
  Entry& mine = s.entries[d];
  mine.thread = t;
  if (comm) {
    if (s.inflight == 0) s.completed_seen = g_completed.load(std::memory_order_relaxed);
    ++s.comm_open;
    mine.start = probe_now();
    comm_call_begin(t, mine.start);
  }
  if constexpr (S == Scope::kFunction) {
    if (!comm && g_record_shapes.load(std::memory_order_relaxed)) mine.signature = signature_of(rf);
  }
  probe_start(t);
  // The frame is this thread's innermost once started.
  if (comm || mine.signature != 0) mine.node = probe_current_node(t);
  if (mine.signature != 0) mine.start = probe_now();
}

void pop_comm(Stack& s, const Entry& e) {
  if (e.thread == nullptr) {
    if (!e.bytes_known && g_recording.load(std::memory_order_relaxed))
      add_pending(s, Pending{nullptr, e.op, 0, 0, e.posted_before});
    return;
  }
  uint64_t now = probe_now();
  if (e.bytes_known) {
    CallCost cost;
    cost.bytes = e.bytes;
    cost.comm = comm_of(e.op);
    probe_exit(e.thread, &cost, nullptr);
  } else {
    probe_exit(e.thread, nullptr, nullptr);
    add_pending(
        s, Pending{e.thread, e.op, e.node, now > e.start ? now - e.start : 0, e.posted_before});
  }
  --s.comm_open;
  comm_call_end(e.thread, probe_now(), false, 1, 0);
  s.comm_thread = e.thread;
  ++s.inflight;
}

template <Scope S>
void pop() {
  Stack& s = t_stack.get();
  if (s.depth == 0) return;  // an event that started before sonde's callbacks were added
  uint32_t d = --s.depth;
  Entry e = d < kMaxDepth ? s.entries[d] : Entry{};
  if (e.passing) {
    g_reader.enable_record_function(true);
  } else if (e.sampling) {
    sampled(e, s.events - e.events_before);
  }
  if (e.restores) {
    s.function_depth = e.saved_function_depth;
  } else if (s.function_depth > 0) {
    --s.function_depth;
  }
  if (is_comm(e.op)) return pop_comm(s, e);
  if (e.thread == nullptr) return;
  if (e.signature != 0) {
    uint64_t now = probe_now();
    probe_op_shape(e.thread, e.node, e.signature, now > e.start ? now - e.start : 0);
  }
  probe_exit(e.thread, nullptr, nullptr);
}

}  // namespace

template <Scope S>
std::unique_ptr<torch_abi::ObserverContext> on_start(const torch_abi::RecordFunction& rf) {
  if constexpr (S == Scope::kUserScope) {
    // Never on the thread's stack: a work item's event ends on the thread that finishes it.
    if (!g_recording.load(std::memory_order_relaxed)) return nullptr;
    const OpName* op = op_name(g_reader.name(&rf), true);
    if (op != nullptr && op->role == Role::kTransfer) on_transfer_start(rf, op);
  } else {
    push<S>(rf);
  }
  return nullptr;
}

template <Scope S>
void on_end(const torch_abi::RecordFunction& rf, torch_abi::ObserverContext*) {
  if constexpr (S == Scope::kUserScope) {
    const OpName* op = op_name(g_reader.name(&rf), true);
    if (op != nullptr && op->role == Role::kTransfer) {
      uint64_t now = probe_now(), at = g_completed_at.load(std::memory_order_relaxed);
      while (at < now &&
             !g_completed_at.compare_exchange_weak(at, now, std::memory_order_relaxed)) {
      }
      g_completed.fetch_add(1, std::memory_order_release);
    }
  } else {
    pop<S>();
  }
}

void settle_thread() {
  Stack& s = t_stack.get();
  await_posting();
  pair_transfers(s);
  settle_all(s);
}

void poll_thread() {
  if (g_recording.load(std::memory_order_relaxed)) poll_completions(t_stack.get());
}

uint64_t calls_past_pending() { return g_pending_overflow.load(std::memory_order_relaxed); }

template std::unique_ptr<torch_abi::ObserverContext> on_start<Scope::kFunction>(
    const torch_abi::RecordFunction&);
template std::unique_ptr<torch_abi::ObserverContext> on_start<Scope::kBackwardFunction>(
    const torch_abi::RecordFunction&);
template std::unique_ptr<torch_abi::ObserverContext> on_start<Scope::kUserScope>(
    const torch_abi::RecordFunction&);
template void on_end<Scope::kFunction>(const torch_abi::RecordFunction&,
                                       torch_abi::ObserverContext*);
template void on_end<Scope::kBackwardFunction>(const torch_abi::RecordFunction&,
                                               torch_abi::ObserverContext*);
template void on_end<Scope::kUserScope>(const torch_abi::RecordFunction&,
                                        torch_abi::ObserverContext*);

}  // namespace sonde::torch_ops
