// The hot path: what runs on every measured call. No lock, no allocation (except when a call
// path is new), no system call.
#include "sonde/probe.hpp"

#include <errno.h>
#include <pthread.h>
#include <time.h>

#include "core/clock.hpp"
#include "core/frame_ops.hpp"
#include "core/op_signatures.hpp"
#include "core/probe_inline.hpp"
#include "core/signal_block.hpp"
#include "core/thread_local_state.hpp"

namespace sonde {

constinit thread_local ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;
constinit thread_local bool t_internal __attribute__((tls_model("initial-exec"))) = false;
std::atomic<bool> g_exit_gate_closed{false};

namespace {
std::atomic<pthread_t> g_exiting_thread{};
}  // namespace

void close_exit_gate() {
  g_exiting_thread.store(pthread_self(), std::memory_order_relaxed);
  g_exit_gate_closed.store(true, std::memory_order_release);
}

void wait_at_exit_gate() {
  if (pthread_equal(g_exiting_thread.load(std::memory_order_relaxed), pthread_self())) return;
  // Bounded: a held thread may own a lock that a library destructor still needs.
  int saved = errno;
  for (int i = 0; i < 300; ++i) {
    struct timespec ten_ms = {0, 10 * 1000 * 1000};
    nanosleep(&ten_ms, nullptr);
  }
  errno = saved;
}

RoutineBatch::RoutineBatch() : block_(new AsyncSignalBlock) {}
RoutineBatch::~RoutineBatch() { delete static_cast<AsyncSignalBlock*>(block_); }

using inline_probe::current;

ThreadState* probe_enter(RoutineId routine, Nesting nesting) {
  ThreadState* t = current();
  if (t == nullptr || open_frame<true>(t, routine, nesting) == nullptr) return nullptr;
  begin_call(t, now_ticks);
  return t;
}

ThreadState* probe_open(RoutineId routine, Nesting nesting) {
  return inline_probe::open(routine, nesting);
}

void probe_start(ThreadState* t) { inline_probe::start(t); }

ThreadState* probe_resume(RoutineId routine, Nesting nesting) {
  ThreadState* t = current();
  if (t == nullptr || open_frame<false>(t, routine, nesting) == nullptr) return nullptr;
  start_frame(t, now_ticks());
  return t;
}

void probe_since_thread_start(RoutineId routine) {
  ThreadState* t = current();
  if (t == nullptr || t->depth() != 0) return;
  if (open_frame<true>(t, routine, Nesting::kChildren) == nullptr) return;
  begin_call(t, [t] { return t->start_ticks(); });
  end_call(t, nullptr, nullptr, now_ticks);
}

void probe_open_until_exit(RoutineId routine) {
  ThreadState* t = current();
  if (t == nullptr || t->depth() != 0) return;
  if (open_frame<true>(t, routine, Nesting::kChildren) == nullptr) return;
  begin_call(t, now_ticks);
}

uint32_t probe_suspend_stack(SuspendedFrame* out, uint32_t cap, const void** owner) {
  ThreadState* t = t_state;
  *owner = t;
  if (t == nullptr) return 0;
  uint32_t n = t->depth();
  if (n > cap) return n;
  return suspend_stack(t, out, now_ticks());
}

void probe_resume_stack(const void* owner, const SuspendedFrame* frames, uint32_t n) {
  ThreadState* t = t_state;
  if (t == nullptr || t != owner || n == 0) return;
  resume_stack(t, frames, n, now_ticks());
}

uint64_t probe_now() { return now_ticks(); }

namespace {
std::atomic<InterpreterFrameFn> g_interpreter_frame{nullptr};
}  // namespace

void set_interpreter_frame_fn(InterpreterFrameFn fn) {
  g_interpreter_frame.store(fn, std::memory_order_release);
}

const void* interpreter_frame() {
  InterpreterFrameFn fn = g_interpreter_frame.load(std::memory_order_acquire);
  return fn != nullptr ? fn() : nullptr;
}

void exclude_from_open_frames(uint64_t ticks) {
  ThreadState* t = t_state;
  if (t != nullptr) t->exclude_from_open_frames(ticks);
}

void record_line(RoutineId routine, int line, uint64_t ticks, uint32_t hits) {
  ThreadState* t = t_state;
  if (t != nullptr && !t->window_closed()) t->record_line(routine, line, ticks, hits);
}

// Called between open_frame and the frame's start: the frame lies just above depth().
void comm_call_begin(ThreadState* t, uint64_t now) {
  CommClock& c = t->comm_clock;
  // A poll again soon after one that found nothing: the loop between them waited. A red team's
  // rank spinning 0.9 s on `while not req.Test()` read 57 % of its communication overlapped.
  // Or later, where the thread spent no more CPU time than such a loop in between: it was off
  // its core (a loaded host, ranks sharing cores) or asleep between its polls, not computing;
  // a CI run's spinning rank, taken off its core for milliseconds at a time, read 0.149 s of
  // its 0.6 s of waiting overlapped.
  if (c.idle_poll && c.in_call == 0 && now > c.last) {
    uint64_t dt = now - c.last;
    bool waited = dt <= kSpinGapTicks + c.poll_read_ticks;
    if (!waited && c.poll_cpu_ns >= 0) {
      int64_t cpu = own_cpu_ns();
      waited = cpu >= c.poll_cpu_ns && cpu - c.poll_cpu_ns <= kSpinGapCpuNs;
    }
    if (waited) {
      c.last = now;
      if (c.inflight > 0) bump(c.inflight_ticks, dt);
      bump(c.exposed, dt);
    }
  }
  c.idle_poll = false;
  c.advance(now);
  uint32_t d = t->depth();
  // A call made inside the outermost one finds that call's frame still below it; else a jump
  // left that call (core/left_frames.hpp took its frame off) and the thread is out of it.
  if (c.in_call > 0) {
    bool outer_open = d > c.call_depth && t->stack_[c.call_depth + 1].node.load(
                                              std::memory_order_relaxed) == c.call_node;
    if (!outer_open) c.in_call = 0;
  }
  if (c.in_call++ == 0) {
    c.call_start = now;
    c.call_depth = d;
    c.call_node = t->stack_[d + 1].node.load(std::memory_order_relaxed);
  }
}

void comm_call_pending(ThreadState* t, const CommCost& comm, uint64_t bytes, bool exposed) {
  CommClock& c = t->comm_clock;
  if (c.in_call != 1) return;  // a call inside the outermost one: that one is the record
  PendingComm& p = t->pending_comm;
  p.kind.store(uint8_t(comm.kind), std::memory_order_relaxed);
  p.blocking.store(comm.blocking, std::memory_order_relaxed);
  p.size.store(comm.comm_size, std::memory_order_relaxed);
  p.bytes.store(bytes, std::memory_order_relaxed);
  p.exposed.store(exposed, std::memory_order_relaxed);
  p.start.store(c.call_start, std::memory_order_relaxed);
  p.depth.store(c.call_depth, std::memory_order_relaxed);
  p.node.store(c.call_node, std::memory_order_relaxed);
  p.pending.store(true, std::memory_order_release);
}

void comm_call_end(ThreadState* t, uint64_t now, bool exposed, int started, int completed) {
  CommClock& c = t->comm_clock;
  c.advance(now);
  if (c.in_call > 0 && --c.in_call == 0) {
    t->pending_comm.pending.store(false, std::memory_order_relaxed);  // the outermost's end
    if (exposed && now > c.call_start) bump(c.exposed, now - c.call_start);
  }
  c.inflight += started - completed;
  if (c.inflight < 0) c.inflight = 0;
  if (!c.used.load(std::memory_order_relaxed)) c.used.store(true, std::memory_order_release);
}

void comm_call_polled(ThreadState* t) {
  CommClock& c = t->comm_clock;
  if (c.in_call != 0) return;
  c.idle_poll = true;
  // A system call (the scheduler's clock has no vDSO path, about 0.35 us here), on every poll
  // that found nothing: in a spin the thread is waiting anyway; a program polling between
  // pieces of work pays it per poll. Read only after a spin's gap and one poll in 16 otherwise,
  // a rank spinning beside two busy loops read up to 0.21 s of its 0.6 s of waiting overlapped
  // again (2 runs of 6 failed the e2e cell): each gap needs the clock read at its start.
  uint64_t before = now_ticks();
  c.poll_cpu_ns = own_cpu_ns();
  c.poll_read_ticks = now_ticks() - before;
}

void comm_completed(ThreadState* t, uint64_t now, int completed) {
  CommClock& c = t->comm_clock;
  c.advance(now);
  c.inflight -= completed;
  if (c.inflight < 0) c.inflight = 0;
}

uint32_t probe_current_node(ThreadState* t) {
  return t->node_ref(t->top().node.load(std::memory_order_relaxed));
}

void comm_record_late(ThreadState* t, uint32_t ref, const CommCost& comm, uint64_t bytes,
                      uint64_t ticks) {
  uint32_t node = t->node_of_ref(ref);
  if (node == ThreadState::kNoNode) return;  // a call from before a fork: not the child's
  bump(t->nodes[node].bytes, bytes);
  t->record_comm(node, comm, bytes, ticks);
}

uint32_t probe_op_signature(std::string_view shapes, std::string_view dtypes) {
  try {
    return op_signatures().intern(shapes, dtypes);
  } catch (...) {  // without memory, as past the table's size: the call keeps no signature
    return 0;
  }
}

void probe_op_shape(ThreadState* t, uint32_t ref, uint32_t signature, uint64_t ticks) {
  uint32_t node = t->node_of_ref(ref);
  if (signature != 0 && node != ThreadState::kNoNode) t->record_op_shape(node, signature, ticks);
}

uint64_t probe_op_signatures_refused() { return op_signatures().refused(); }

void comm_untracked(ThreadState* t, uint64_t requests) { bump(t->comm_clock.untracked, requests); }

void probe_exit(ThreadState* t, const CallCost* cost, const void* call_site) {
  inline_probe::exit(t, cost, call_site);
}

void probe_exit_frame(ThreadState* t) {
  while (__builtin_expect(t->top().nesting == Nesting::kRegion, 0) && t->depth() > 1) {
    t->region_closed_by_frame(t->nodes[t->top().node.load(std::memory_order_relaxed)].routine);
    inline_probe::exit(t, nullptr, nullptr);
  }
  inline_probe::exit(t, nullptr, nullptr);
}

void probe_cancel(ThreadState* t) { cancel_frame(t); }

}  // namespace sonde
