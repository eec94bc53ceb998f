// Everything one thread records: its shadow stack, its calling-context tree, the shapes of its
// GEMM-like calls, and (trace mode) its event ring. Written only by the owning thread without
// locks; read by the flushing thread through acquire/relaxed atomics (see chunked_array.hpp).
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/chunked_array.hpp"
#include "core/frame_stack.hpp"
#include "core/thread_cpu.hpp"
#include "core/window.hpp"
#include "counters/counter_backend.hpp"
#include "process/sampler.hpp"
#include "sonde/probe.hpp"

namespace sonde {

enum class AdaptiveTiming : uint8_t { kWarmUp, kSampled, kFull };

// What SONDE_ADAPTIVE asks of every thread; mask 0: off (every call timed).
struct AdaptiveConfig {
  uint64_t mask = 0;         // a call is timed when its random draw & mask is 0 (rate - 1)
  uint32_t warmup = 10000;   // calls timed in full on a call path before it may be sampled
  uint64_t short_ticks = 0;  // a path is sampled when more than half its warm-up calls are shorter
};

struct Node {
  // Set once before the node is published; immutable afterwards.
  uint32_t parent = 0;
  RoutineId routine = 0;
  // Owner-only: the child entered last from here, and its routine beside it. Loops enter the
  // same child over and over, so one comparison in the parent's own first cache line (which
  // the call's subrs bump reads anyway) usually settles the lookup; the thread's child index
  // does the rest. The routine is kept here, not read from the child, whose line is cold when
  // the parent alternates between children.
  RoutineId hot_routine = 0;
  uint32_t hot_child = 0;
  std::atomic<uint64_t> calls{0}, subrs{0};
  std::atomic<uint64_t> incl_ticks{0}, excl_ticks{0};
  std::atomic<uint64_t> flops{0}, bytes{0};
  // Counter deltas (SONDE_COUNTERS), inclusive and exclusive like the times.
  std::atomic<uint64_t> counter_incl[kMaxCounters]{}, counter_excl[kMaxCounters]{};
  // Adaptive timing (SONDE_ADAPTIVE, core/adaptive_timing.hpp). Once sampling, incl_ticks and
  // excl_ticks stop at the warm-up's exact times and the timed calls of the sampled part add up
  // apart, to be scaled at the flush: calls - warm_calls calls, `timed` of them timed.
  AdaptiveTiming timing = AdaptiveTiming::kWarmUp;  // owner-only
  uint32_t warm_closed = 0, warm_fast = 0;          // owner-only: warm-up calls, and short ones
  uint32_t depth = 0;       // set once, as parent and routine; here, out of the hot first line
  uint64_t mean_ticks = 0;  // owner-only: what an untimed call adds to its caller's children
  std::atomic<uint64_t> warm_calls{0}, timed{0}, timed_incl{0}, timed_excl{0};
  std::atomic<double> timed_sq{0};  // sum of the squared inclusive times, for the error
};

// A frame's start when the call is not timed (adaptive timing): the flusher then sees no elapsed
// time in it (now > start never holds).
inline constexpr uint64_t kUntimed = ~uint64_t(0);

struct ShapeRecord {
  uint32_t node = 0;
  const void* site = nullptr;
  GemmShape shape;
  std::atomic<uint64_t> calls{0}, ticks{0}, flops{0}, bytes{0};
  std::atomic<uint64_t> timed{0};  // calls whose ticks were read (all unless adaptive timing)
};

struct CommRecord {
  uint32_t node = 0;
  CommCost comm;
  uint64_t bytes = 0;  // per call
  std::atomic<uint64_t> calls{0}, ticks{0};
};

// Owner-only clock of a thread's communication: what it has added up is published in the atomics
// for the flusher (comm_overlap).
// The outermost communication call's record to be (comm_call_pending), for the thread's last
// flush to find it open; `pending` is published after the rest and cleared by comm_call_end.
// Kept at the thread state's end, past the fields every call reads: in CommClock it moved them
// 48 bytes.
struct PendingComm {
  std::atomic<bool> pending{false};
  std::atomic<uint8_t> kind{0};
  std::atomic<bool> blocking{false}, exposed{false};
  std::atomic<int32_t> size{0};
  std::atomic<uint64_t> bytes{0}, start{0};
  std::atomic<uint32_t> depth{0}, node{0};
};

struct CommClock {
  uint64_t last = 0;  // the last transition
  int32_t in_call = 0;
  int64_t inflight = 0;
  uint64_t call_start = 0;
  // The outermost call's frame: its depth and node, for comm_call_begin to see whether a
  // longjmp left it (its frame off the stack, comm_call_end never run).
  uint32_t call_depth = 0, call_node = 0;
  // The last call was a poll that found nothing, ended at `last` (comm_call_polled), with the
  // thread's CPU time read after it (own_cpu_ns; -1 unread) and the ticks that read took: a
  // system call of about 0.35 us here, no part of the gap a spin is judged by.
  bool idle_poll = false;
  int64_t poll_cpu_ns = -1;
  uint64_t poll_read_ticks = 0;
  std::atomic<uint64_t> exposed{0}, overlapped{0}, inflight_ticks{0}, untracked{0};
  std::atomic<bool> used{false};
  void advance(uint64_t now);
};

// An operator's calls on one call path with one input signature (`--record-shapes`).
struct OpShapeRecord {
  uint32_t node = 0;
  uint32_t signature = 0;  // core/op_signatures.hpp
  std::atomic<uint64_t> calls{0}, ticks{0};
};

struct LineRecord {
  RoutineId routine = 0;
  int line = 0;
  std::atomic<uint64_t> hits{0}, ticks{0};
};

struct TraceEvent {
  uint32_t node;
  uint64_t start, end;
};

// The trace buffers of all threads of a process draw on one budget (SONDE_TRACE_MEMORY): 64
// threads at the default per-thread capacity would otherwise hold 1.6 GB.
class TraceBudget {
 public:
  explicit TraceBudget(uint64_t cap_bytes) : cap_(cap_bytes) {}
  bool take(uint64_t bytes) {
    if (used_.fetch_add(bytes, std::memory_order_relaxed) + bytes <= cap_) return true;
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    return false;
  }
  void give(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }
  uint64_t cap() const { return cap_; }
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }

 private:
  const uint64_t cap_;
  std::atomic<uint64_t> used_{0};
};

// Bounded single-producer (owner) single-consumer (flusher) ring of `capacity` events, stored
// in chunks allocated as the ring first reaches them: memory follows the events a thread
// records, not the capacity it may use. A chunk the budget refuses (or malloc) drops the event,
// counted, never aborts. Chunks stay until the ring dies, so a steady thread allocates nothing.
class TraceRing {
 public:
  explicit TraceRing(uint64_t capacity, TraceBudget* budget = nullptr);
  ~TraceRing();
  TraceRing(const TraceRing&) = delete;
  TraceRing& operator=(const TraceRing&) = delete;

  void push(const TraceEvent& e) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) == capacity_) {
      bump(dropped_, 1);
      return;
    }
    TraceEvent* chunk = chunks_[write_pos_ >> chunk_shift_];
    if (chunk == nullptr && (chunk = grow()) == nullptr) {
      bump(dropped_, 1);
      bump(dropped_by_budget_, 1);
      return;
    }
    chunk[write_pos_ & chunk_mask_] = e;
    if (++write_pos_ == capacity_) write_pos_ = 0;
    // Publishes the event and the chunk pointer written before it.
    head_.store(h + 1, std::memory_order_release);
  }
  template <class F>
  void drain(F&& consume) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    uint64_t h = head_.load(std::memory_order_acquire);
    for (; t != h; ++t) {
      consume(chunks_[read_pos_ >> chunk_shift_][read_pos_ & chunk_mask_]);
      if (++read_pos_ == capacity_) read_pos_ = 0;
    }
    tail_.store(t, std::memory_order_release);
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  // The part of dropped() refused by the process's budget rather than this ring's capacity.
  uint64_t dropped_by_budget() const { return dropped_by_budget_.load(std::memory_order_relaxed); }
  // Drained events that a flush could not write (a full disk): the flusher's own count, kept
  // apart from dropped_, which only the owner writes.
  void count_unwritten(uint64_t n) { bump(unwritten_, n); }
  uint64_t unwritten() const { return unwritten_.load(std::memory_order_relaxed); }
  uint64_t capacity() const { return capacity_; }
  uint64_t bytes_held() const { return bytes_held_; }
  // Only with the owner stopped (fork child): forgets unread events, keeps the chunks.
  void clear() {
    tail_.store(head_.load(std::memory_order_relaxed), std::memory_order_relaxed);
    read_pos_ = write_pos_;
    dropped_.store(0, std::memory_order_relaxed);
    dropped_by_budget_.store(0, std::memory_order_relaxed);
    unwritten_.store(0, std::memory_order_relaxed);
  }

 private:
  TraceEvent* grow();
  uint64_t chunk_count() const { return (capacity_ + chunk_mask_) >> chunk_shift_; }

  TraceBudget* budget_;
  uint64_t capacity_;
  uint32_t chunk_shift_;
  uint64_t chunk_mask_;
  std::unique_ptr<TraceEvent*[]> chunks_;
  uint64_t bytes_held_ = 0;
  uint64_t write_pos_ = 0;  // owner: slot of the next push
  uint64_t read_pos_ = 0;   // flusher: slot of the next drain
  std::atomic<uint64_t> head_{0}, tail_{0}, dropped_{0}, dropped_by_budget_{0};
  std::atomic<uint64_t> unwritten_{0};
};

// Adaptive timing's outliers on one call path (frame_ops.hpp clip_outlier): what the path's
// timed calls had above the bound, cut off their sums to be counted once at the flush, and the
// squares' part cut off (for the unclipped variance). Few paths have any, so a thread keeps a
// small table of them rather than these fields in every Node (192 bytes, indexed on each call).
struct OutlierSums {
  std::atomic<uint32_t> node{0};  // 0: a free slot (node 0 is the thread's root, never timed)
  std::atomic<uint64_t> count{0}, incl{0}, excl{0};
  std::atomic<double> sq{0};
};
inline constexpr uint32_t kOutlierPaths = 32;

class ThreadState {
 public:
  ThreadState(uint32_t seq, pid_t tid, uint64_t start_ticks, uint32_t max_depth,
              uint64_t trace_capacity, TraceBudget* trace_budget = nullptr);

  // --- owner thread, hot path ---
  // The child of `parent` for `routine`, made when new; `parent` itself at the node limit.
  // The parent's hot child inline (a loop enters the same one over and over, and the child's
  // first cache line is the one the call's counts go to); the index out of line.
  uint32_t child_of(uint32_t parent, RoutineId routine) {
    const Node& p = nodes[parent];
    if (__builtin_expect(p.hot_routine == routine, 1) && p.hot_child != 0) return p.hot_child;
    return find_child(parent, routine);
  }
  uint32_t depth() const { return depth_.load(std::memory_order_relaxed); }
  StackEntry& top() { return stack_[depth()]; }

  // --- owner thread, slow path ---
  // `timed` false: an untimed call (adaptive timing), counted but without ticks. The shape and
  // the communication come by value: a wrapper's CallCost, whose address would otherwise
  // escape here, stays in registers, and its constant fields fold away (probe_inline.hpp).
  void record_shape(uint32_t node, const void* site, GemmShape shape, uint64_t ticks,
                    uint64_t flops, uint64_t bytes, bool timed = true);
  void record_line(RoutineId routine, int line, uint64_t ticks, uint32_t hits);
  void record_comm(uint32_t node, CommCost comm, uint64_t bytes, uint64_t ticks);
  void record_op_shape(uint32_t node, uint32_t signature, uint64_t ticks);
  // Moves the open frames' starts `ticks` later (the root's stays: the time becomes the
  // thread's own), for time sonde spent inside them (probe.hpp exclude_from_open_frames).
  void exclude_from_open_frames(uint64_t ticks) {
    for (uint32_t d = 1; d <= depth(); ++d) {
      uint64_t start = stack_[d].start.load(std::memory_order_relaxed);
      if (start != kUntimed) stack_[d].start.store(start + ticks, std::memory_order_relaxed);
    }
  }
  // Forgets all measurements but keeps the open frames, reset to `now` (fork child): a tree
  // of their one path alone, the records and indexes emptied (where the new tree's index gets
  // no memory, the old tree with every count zeroed).
  void reset_counts(uint64_t now);
  // The call tree's generation: a fork child's tree is another (reset_counts). A node handed
  // out of the owner's code and used later (probe_current_node's, a suspended greenlet's
  // frames) is named by a reference that carries it, so that one taken before a fork names no
  // node in the child, rather than another one (or one past its nodes).
  static constexpr uint32_t kNodeBits = 20, kTreeMask = (1u << (32 - kNodeBits)) - 1;
  static constexpr uint32_t kNoNode = ~0u;
  uint32_t node_ref(uint32_t node) const { return node | (tree_ << kNodeBits); }
  uint32_t node_of_ref(uint32_t ref) const {
    uint32_t node = ref & ((1u << kNodeBits) - 1);
    return (ref >> kNodeBits) == tree_ && node < nodes.size_owner() ? node : kNoNode;
  }
  // Fork child, before its flusher starts: the forking thread is the new process's first
  // thread, with the kernel's id for it there (the parent's tid is another thread's).
  void renumber(uint32_t seq, pid_t tid) {
    seq_ = seq;
    tid_ = tid;
  }
  // Samples the FPU control word; denormal handling matters for the advice.
  void sample_fpu();

  // --- any thread ---
  uint32_t seq() const { return seq_; }
  pid_t tid() const { return tid_; }
  uint64_t start_ticks() const { return start_ticks_.load(std::memory_order_relaxed); }
  uint64_t end_ticks() const { return end_ticks_.load(std::memory_order_acquire); }
  // The collection window opened at `t`: the thread's life, and its root frame, count from
  // there (nothing was measured before; a thread that had ended lasted no time in it). Its CPU
  // time does not: this runs at the first flush after the opening, too late to read the clock
  // then, so a thread that worked before the window is judged busy, never waiting.
  void start_no_earlier_than(uint64_t t) {
    uint64_t end = end_ticks();
    if (end != 0 && end < t) t = end;
    if (start_ticks() >= t) return;
    start_ticks_.store(t, std::memory_order_relaxed);
    stack_.root().start.store(t, std::memory_order_relaxed);
  }
  // The thread's CPU time from its registration to its end or now (under a collection window,
  // from before the window's opening too); -1 where it could not be read. thread_times tells
  // a thread waiting for work from one working unseen by it.
  int64_t cpu_ns() const;
  // Owner, as it exits: keeps its name (gone from /proc afterwards) and its CPU time, then
  // publishes the end. `syscalls`: read both now; a thread under a seccomp filter may not open
  // /proc, and keeps the name read as the filter came (read_name) and no CPU time.
  void mark_ended(uint64_t t, bool syscalls = true);
  void read_name();
  const char* final_name() const { return final_name_; }

  // Small first chunks: a thread costs little until it has many call paths (up to 1 M nodes).
  ChunkedArray<Node, 8, 4096> nodes;
  // The call paths (nodes) one thread can hold: 4,096 chunks of 256; calls beyond are charged
  // to their caller and counted (the note `nodes`).
  static constexpr uint32_t kMaxNodes = decltype(nodes)::kCapacity;
  static_assert(kMaxNodes <= 1u << kNodeBits, "a node reference holds every node index");
  ChunkedArray<ShapeRecord, 6, 4096> shapes;
  ChunkedArray<LineRecord, 6, 4096> lines;
  ChunkedArray<CommRecord, 6, 4096> comms;
  ChunkedArray<OpShapeRecord, 6, 4096> op_shapes;
  CommClock comm_clock;
  FrameStack stack_;
  std::atomic<uint32_t> depth_{0};
  uint32_t suppress = 0;  // >0 while a kSuppress routine runs; also set by sonde's own code
  // The bit of `suppress` a thread attached while the collection window was closed carries:
  // open_frame's one test of `suppress` covers the window too, so no call reads a shared flag.
  static constexpr uint32_t kWindowClosed = 1u << 31;
  CollectionWindow* window = nullptr;  // the runtime's, where the bit may be set
  // Owner only, on open_frame's cold side: drops the bit once the window has opened; true
  // while the window, or a suppressing routine, still holds this thread's calls back.
  __attribute__((noinline)) bool held_back();
  // Owner only: whether the window is still closed (dropping the bit once it is not).
  bool window_closed() {
    if (__builtin_expect((suppress & kWindowClosed) == 0, 1)) return false;
    held_back();
    return (suppress & kWindowClosed) != 0;
  }
  std::atomic<uint64_t> depth_overflows{0};
  // Native calls left without returning (a longjmp or an exception through them), found by a
  // later call of the thread (left_frames.hpp).
  std::atomic<uint64_t> abandoned{0};
  std::atomic<uint64_t> node_overflows{0};
  std::atomic<uint64_t> region_mismatches{0};
  uint32_t regions_before_window = 0;  // begun before the collection window opened, still open
  uint32_t regions_refused = 0;  // begun beyond the depth or node limit (innermost), still open
  // Regions a Python frame's return closed (probe_exit_frame), their ends still to come: an end
  // takes its own region's entry, so one never ended cannot absorb another's unmatched end.
  // Kept per region with a count: 100 asyncio tasks each awaiting inside `with region("load")`
  // close "load" 100 times before its first end, and a memory of the last 16 closes counted 84
  // of their ends as mismatches (a red-team find). The least recent of 16 regions goes when a
  // 17th comes (its ends, if they come, then count as mismatches).
  void region_closed_by_frame(RoutineId region) {
    uint32_t i = 0;
    while (i < closed_regions_count_ && closed_regions_[i].region != region) ++i;
    ClosedRegion entry{region, 1};
    if (i < closed_regions_count_) {
      entry.pending = closed_regions_[i].pending + 1;
    } else if (closed_regions_count_ == kClosedRegions) {
      i = 0;  // the least recent goes
    } else {
      i = closed_regions_count_++;
    }
    for (uint32_t j = i + 1; j < closed_regions_count_; ++j)
      closed_regions_[j - 1] = closed_regions_[j];
    closed_regions_[closed_regions_count_ - 1] = entry;  // the most recent last
  }
  bool take_region_closed_by_frame(RoutineId region) {
    for (uint32_t i = 0; i < closed_regions_count_; ++i) {
      if (closed_regions_[i].region != region) continue;
      if (--closed_regions_[i].pending == 0) {
        for (uint32_t j = i + 1; j < closed_regions_count_; ++j)
          closed_regions_[j - 1] = closed_regions_[j];
        --closed_regions_count_;
      }
      return true;
    }
    return false;
  }
  std::atomic<uint32_t> fpu_seen{0};  // OR of the MXCSR FTZ/DAZ bits observed
  std::unique_ptr<TraceRing> trace;
  std::unique_ptr<ThreadSamples> samples;  // SONDE_SAMPLE_HZ only
  // Counters: the runtime's backend and this thread's handle; `counters` is 0 when off.
  CounterBackend* counter_backend = nullptr;
  int counter_handle = -1;
  uint32_t counters = 0;
  bool counters_frozen = false;  // owner-only: a seccomp filter on this thread (frame_ops.hpp)
  // Owner-only: this thread's errno, taken at attach, so that a wrapper keeps the host's errno
  // without a call into libc (__errno_location through the PLT) on each measured call.
  int* errno_loc = nullptr;
  AdaptiveConfig adaptive;  // mask 0 unless SONDE_ADAPTIVE (never with trace or counters)
  uint64_t rng = 0;         // owner-only xorshift state of the adaptive draw
  OutlierSums outlier_sums[kOutlierPaths];  // claimed by the owner, read by the flusher

  // Region names are usually literals: a small pointer-keyed cache avoids the registry lock.
  struct RegionCacheEntry {
    const char* name = nullptr;
    const char* copy = nullptr;  // our own copy of the text, to detect a reused buffer
    RoutineId id = 0;
  };
  RegionCacheEntry region_cache[64];
  PendingComm pending_comm;  // cold: written per communication call, read at the last flush

 private:
  static constexpr uint32_t kClosedRegions = 16;
  struct ClosedRegion {
    RoutineId region{};
    uint32_t pending = 0;  // its ends still to come
  };
  std::array<ClosedRegion, kClosedRegions> closed_regions_{};
  uint32_t closed_regions_count_ = 0;
  __attribute__((noinline)) uint32_t find_child(uint32_t parent, RoutineId routine);
  bool restart_tree();  // reset_counts' new tree; false where its index got no memory
  void zero_counts();   // reset_counts without one: the old tree, every count zeroed
  uint32_t find_shape(uint32_t node, const void* site, const GemmShape& s);
  void index_child(uint32_t node, uint32_t parent, RoutineId routine);

  uint32_t tree_ = 0;  // the call tree's generation, masked by kTreeMask
  uint32_t seq_;
  pid_t tid_;
  std::atomic<uint64_t> start_ticks_;
  std::atomic<uint64_t> end_ticks_{0};
  std::atomic<int64_t> cpu_start_ns_{-1}, cpu_end_ns_{-1};  // thread_cpu_ns at start and end
  char final_name_[16] = {};              // Linux thread names are at most 15 characters
  std::vector<uint32_t> shape_index_;     // owner-only open addressing: record index + 1
  std::vector<uint32_t> comm_index_;      // owner-only open addressing: record index + 1
  std::vector<uint32_t> op_shape_index_;  // owner-only open addressing: record index + 1
  std::vector<uint32_t> line_index_;  // owner-only open addressing on (routine, line): index + 1
  // Owner-only open addressing on (parent, routine) -> node; node 0 is free (the root is no
  // child). The key is in the slot: a probe reads the index alone, never a cold 192-byte node
  // (a wide Python call graph spent a fifth of its L1 misses there, reading nodes' keys).
  struct ChildSlot {
    uint32_t parent = 0;
    RoutineId routine = 0;
    uint32_t node = 0;
  };
  std::vector<ChildSlot> child_index_ = std::vector<ChildSlot>(64);
};

}  // namespace sonde
