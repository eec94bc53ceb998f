#include "core/thread_state.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <new>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace sonde {

namespace {

// The owner's open-addressing index over a chunked record array (slots hold record index + 1),
// shared by line costs, communication records and operator signatures: the record of hash h
// matching `same`, added with `init` when absent; the array's kFull when it is full. The index
// doubles past half full, rehashing each record with `hash_of`, so probe chains stay short.
template <class Records, class HashOf, class Same, class Init>
uint32_t find_or_add(std::vector<uint32_t>& index, Records& records, uint64_t h, HashOf hash_of,
                     Same same, Init init) {
  if (index.empty()) index.assign(64, 0);
  size_t mask = index.size() - 1;
  size_t slot = h & mask;
  for (;; slot = (slot + 1) & mask) {
    uint32_t v = index[slot];
    if (v == 0) break;
    if (same(records[v - 1])) return v - 1;
  }
  uint32_t i = records.reserve();
  if (i == records.kFull) return i;
  init(records[i]);
  records.publish(i);
  index[slot] = i + 1;
  if (2 * records.size_owner() > index.size()) {
    std::vector<uint32_t> bigger(index.size() * 2, 0);
    size_t m2 = bigger.size() - 1;
    for (uint32_t j = 0; j < records.size_owner(); ++j) {
      size_t k = hash_of(records[j]) & m2;
      while (bigger[k] != 0) k = (k + 1) & m2;
      bigger[k] = j + 1;
    }
    index.swap(bigger);
  }
  return i;
}

uint64_t shape_hash(uint32_t node, const void* site, const GemmShape& s) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(node);
  mix(reinterpret_cast<uintptr_t>(site));
  mix(uint64_t(s.m));
  mix(uint64_t(s.n));
  mix(uint64_t(s.k));
  mix(uint64_t(s.batch));
  mix(uint64_t(s.threads) << 24 | uint64_t(s.trans_a) << 16 | uint64_t(s.trans_b) << 8 |
      uint64_t(s.dtype));
  return h;
}

bool same_shape(const ShapeRecord& r, uint32_t node, const void* site, const GemmShape& s) {
  return r.node == node && r.site == site && r.shape.m == s.m && r.shape.n == s.n &&
         r.shape.k == s.k && r.shape.batch == s.batch && r.shape.trans_a == s.trans_a &&
         r.shape.trans_b == s.trans_b && r.shape.dtype == s.dtype && r.shape.threads == s.threads;
}

}  // namespace

TraceRing::TraceRing(uint64_t capacity, TraceBudget* budget) : budget_(budget) {
  // Chunks of 4096 events (96 KiB), larger for huge capacities so that the table of chunk
  // pointers stays within 1024 entries; smaller for small ones.
  capacity = std::max<uint64_t>(capacity, 1);
  uint64_t chunk = std::min<uint64_t>(4096, std::bit_ceil(capacity));
  while (capacity / chunk > 1024) chunk *= 2;
  chunk_shift_ = uint32_t(std::countr_zero(chunk));
  chunk_mask_ = chunk - 1;
  capacity_ = capacity;                                      // exact: the last chunk is cut to fit
  chunks_ = std::make_unique<TraceEvent*[]>(chunk_count());  // null: not yet allocated
}

TraceRing::~TraceRing() {
  for (uint64_t i = 0; i < chunk_count(); ++i) delete[] chunks_[i];
  if (budget_ != nullptr) budget_->give(bytes_held_);
}

TraceEvent* TraceRing::grow() {
  uint64_t first = write_pos_ & ~chunk_mask_;
  uint64_t events = std::min(chunk_mask_ + 1, capacity_ - first);
  uint64_t bytes = events * sizeof(TraceEvent);
  if (budget_ != nullptr && !budget_->take(bytes)) return nullptr;
  // Not value-initialised: untouched pages of a chunk cost no memory until events fill them.
  auto* chunk = new (std::nothrow) TraceEvent[events];
  if (chunk == nullptr) {
    if (budget_ != nullptr) budget_->give(bytes);
    return nullptr;
  }
  bytes_held_ += bytes;
  return chunks_[write_pos_ >> chunk_shift_] = chunk;
}

ThreadState::ThreadState(uint32_t seq, pid_t tid, uint64_t start_ticks, uint32_t max_depth,
                         uint64_t trace_capacity, TraceBudget* trace_budget)
    : stack_(max_depth), seq_(seq), tid_(tid), start_ticks_(start_ticks) {
  // Node 0 is the thread root ('<thread>', routine 0); it is never anyone's child.
  uint32_t root = nodes.reserve();
  nodes[root].calls.store(1, std::memory_order_relaxed);
  nodes.publish(root);
  stack_[0].start.store(start_ticks, std::memory_order_relaxed);
  cpu_start_ns_.store(thread_cpu_ns(tid), std::memory_order_relaxed);
  if (trace_capacity > 0) trace = std::make_unique<TraceRing>(trace_capacity, trace_budget);
  sample_fpu();
}

// The callers take bits 20 and up. A product alone leaves its bits below 32 independent of
// the parent (the high word of the key), so every node of one routine (fib at 25 depths) fell
// into one probe chain; folding the high half down makes every bit depend on both.
static uint64_t child_hash(uint32_t parent, RoutineId routine) {
  uint64_t h = (uint64_t(parent) << 32 | routine) * 0x9E3779B97F4A7C15ull;
  return h ^ (h >> 32);
}

uint32_t ThreadState::find_child(uint32_t parent, RoutineId routine) {
  Node& p = nodes[parent];
  auto remember = [&](uint32_t c) {
    p.hot_child = c;
    p.hot_routine = routine;
    return c;
  };
  // Hashed, not a walk over the siblings: a frame with many distinct children (a Python
  // main() calling thousands of functions) must not cost O(children) per call.
  size_t mask = child_index_.size() - 1;
  for (size_t slot = (child_hash(parent, routine) >> 20) & mask;; slot = (slot + 1) & mask) {
    const ChildSlot& c = child_index_[slot];
    if (c.node == 0) break;
    if (c.parent == parent && c.routine == routine) return remember(c.node);
  }
  uint32_t i = nodes.reserve();
  if (i == nodes.kFull) {
    bump(node_overflows, 1);
    return parent;  // charged to the caller: wrong path, right total, and counted
  }
  Node& n = nodes[i];
  n.parent = parent;
  n.routine = routine;
  n.depth = p.depth + 1;
  nodes.publish(i);
  index_child(i, parent, routine);
  sample_fpu();
  return remember(i);
}

void ThreadState::index_child(uint32_t node, uint32_t parent, RoutineId routine) {
  if (2 * (nodes.size_owner() + 1) > child_index_.size()) {  // keep the probe chains short
    std::vector<ChildSlot> bigger(child_index_.size() * 2);
    size_t mask = bigger.size() - 1;
    for (const ChildSlot& c : child_index_) {
      if (c.node == 0) continue;
      size_t k = (child_hash(c.parent, c.routine) >> 20) & mask;
      while (bigger[k].node != 0) k = (k + 1) & mask;
      bigger[k] = c;
    }
    child_index_.swap(bigger);
  }
  size_t mask = child_index_.size() - 1;
  size_t k = (child_hash(parent, routine) >> 20) & mask;
  while (child_index_[k].node != 0) k = (k + 1) & mask;
  child_index_[k] = ChildSlot{parent, routine, node};
}

uint32_t ThreadState::find_shape(uint32_t node, const void* site, const GemmShape& s) {
  if (shape_index_.empty()) shape_index_.assign(64, 0);
  size_t mask = shape_index_.size() - 1;
  for (size_t slot = shape_hash(node, site, s) & mask;; slot = (slot + 1) & mask) {
    uint32_t v = shape_index_[slot];
    if (v == 0) {
      uint32_t i = shapes.reserve();
      if (i == shapes.kFull) return i;
      ShapeRecord& r = shapes[i];
      r.node = node;
      r.site = site;
      r.shape = s;
      shapes.publish(i);
      shape_index_[slot] = i + 1;
      if (2 * shapes.size_owner() > shape_index_.size()) {  // keep the probe chains short
        std::vector<uint32_t> bigger(shape_index_.size() * 2, 0);
        size_t m2 = bigger.size() - 1;
        for (uint32_t j = 0; j < shapes.size_owner(); ++j) {
          const ShapeRecord& q = shapes[j];
          size_t k = shape_hash(q.node, q.site, q.shape) & m2;
          while (bigger[k] != 0) k = (k + 1) & m2;
          bigger[k] = j + 1;
        }
        shape_index_.swap(bigger);
      }
      return i;
    }
    if (same_shape(shapes[v - 1], node, site, s)) return v - 1;
  }
}

void ThreadState::record_shape(uint32_t node, const void* site, GemmShape shape, uint64_t ticks,
                               uint64_t flops, uint64_t bytes, bool timed) {
  uint32_t i = find_shape(node, site, shape);
  if (i == shapes.kFull) return;
  ShapeRecord& r = shapes[i];
  bump(r.calls, 1);
  bump(r.timed, timed);
  bump(r.ticks, ticks);
  bump(r.flops, flops);
  bump(r.bytes, bytes);
}

void ThreadState::record_comm(uint32_t node, CommCost comm, uint64_t bytes, uint64_t ticks) {
  auto hash = [](uint32_t n, const CommCost& c, uint64_t b) {
    uint64_t h = (uint64_t(n) << 32) ^ (uint64_t(uint32_t(c.comm_size)) << 8) ^
                 (uint64_t(c.kind) << 1) ^ uint64_t(c.blocking);
    return (h ^ (b * 0xff51afd7ed558ccdull)) * 0x9E3779B97F4A7C15ull >> 20;
  };
  uint32_t i = find_or_add(
      comm_index_, comms, hash(node, comm, bytes),
      [&](const CommRecord& r) { return hash(r.node, r.comm, r.bytes); },
      [&](const CommRecord& r) {
        return r.node == node && r.bytes == bytes && r.comm.kind == comm.kind &&
               r.comm.blocking == comm.blocking && r.comm.comm_size == comm.comm_size;
      },
      [&](CommRecord& r) {
        r.node = node;
        r.comm = comm;
        r.bytes = bytes;
      });
  if (i == comms.kFull) return;
  bump(comms[i].calls, 1);
  bump(comms[i].ticks, ticks);
}

void ThreadState::record_op_shape(uint32_t node, uint32_t signature, uint64_t ticks) {
  auto hash = [](uint32_t n, uint32_t sig) {
    return ((uint64_t(n) << 32 | sig) * 0x9E3779B97F4A7C15ull) >> 20;
  };
  uint32_t i = find_or_add(
      op_shape_index_, op_shapes, hash(node, signature),
      [&](const OpShapeRecord& r) { return hash(r.node, r.signature); },
      [&](const OpShapeRecord& r) { return r.node == node && r.signature == signature; },
      [&](OpShapeRecord& r) {
        r.node = node;
        r.signature = signature;
      });
  if (i == op_shapes.kFull) return;
  bump(op_shapes[i].calls, 1);
  bump(op_shapes[i].ticks, ticks);
}

bool ThreadState::held_back() {
  if ((suppress & kWindowClosed) != 0 && (window == nullptr || !window->closed()))
    suppress &= ~kWindowClosed;
  return suppress != 0;
}

void CommClock::advance(uint64_t now) {
  // Never back: an operation ended when its work completed, before the poll that saw it
  // (wrappers/torch), lands after a transition made since.
  if (now <= last) return;
  uint64_t dt = now - last;
  last = now;
  if (inflight <= 0) return;
  bump(inflight_ticks, dt);
  if (in_call == 0) bump(overlapped, dt);
}

void ThreadState::record_line(RoutineId routine, int line, uint64_t ticks, uint32_t hits) {
  auto hash = [](RoutineId r, int l) {
    return (uint64_t(r) << 32 | uint32_t(l)) * 0x9E3779B97F4A7C15ull >> 20;
  };
  uint32_t i = find_or_add(
      line_index_, lines, hash(routine, line),
      [&](const LineRecord& r) { return hash(r.routine, r.line); },
      [&](const LineRecord& r) { return r.routine == routine && r.line == line; },
      [&](LineRecord& r) {
        r.routine = routine;
        r.line = line;
      });
  if (i == lines.kFull) return;
  bump(lines[i].hits, hits);
  bump(lines[i].ticks, ticks);
}

bool ThreadState::restart_tree() {
  // A tree of the open frames' path alone, not the parent's tree zeroed: zeroing wrote every
  // node, so each page of the parent's tree became the child's own copy (a child forked under
  // 100,000 Python call paths copied 5,200 pages and started 36 ms after fork(), against 82 and
  // 4 ms plain). The child makes its paths anew as it calls them; the parent's chunks stay
  // shared, let go unwritten (ChunkedArray::reset).
  uint32_t open = depth();
  // The one allocation, first, sized so that the path's nodes never grow it: a std::bad_alloc
  // here leaves everything as it was (reset_counts then zeroes the old tree instead).
  std::vector<ChildSlot> index;
  try {
    index.resize(std::bit_ceil(std::max<std::size_t>(64, 2 * (std::size_t(open) + 2))));
  } catch (const std::bad_alloc&) {
    return false;
  }
  // Each open frame's entry holds its routine while the tree is made again, then the node of
  // its path in the new one.
  static_assert(sizeof(RoutineId) == sizeof(uint32_t), "an entry's node holds a routine");
  for (uint32_t i = 1; i <= open; ++i) {
    StackEntry& e = stack_[i];
    e.node.store(nodes[e.node.load(std::memory_order_relaxed)].routine, std::memory_order_relaxed);
  }
  nodes.reset();
  shapes.reset();
  lines.reset();
  comms.reset();
  op_shapes.reset();
  child_index_.swap(index);  // the old index and the record indexes below are freed
  shape_index_ = {};
  comm_index_ = {};
  op_shape_index_ = {};
  line_index_ = {};
  tree_ = (tree_ + 1) & kTreeMask;
  uint32_t root = nodes.reserve();  // 0, in the chunk reset() kept
  nodes.publish(root);
  for (uint32_t i = 1; i <= open; ++i) {
    // Without memory for a node past the first chunk (the child at its `ulimit -v`),
    // find_child gives the caller's: the frame's time is then its caller's, as at the node
    // limit.
    StackEntry& e = stack_[i];
    e.node.store(find_child(stack_[i - 1].node.load(std::memory_order_relaxed),
                            e.node.load(std::memory_order_relaxed)),
                 std::memory_order_relaxed);
  }
  // A communication call open at the fork is one of those frames.
  auto node_at = [&](uint32_t d) {
    return d <= open ? stack_[d].node.load(std::memory_order_relaxed) : 0;
  };
  comm_clock.call_node = node_at(comm_clock.call_depth + 1);
  pending_comm.node.store(node_at(pending_comm.depth.load(std::memory_order_relaxed) + 1),
                          std::memory_order_relaxed);
  return true;
}

void ThreadState::zero_counts() {
  uint32_t n = nodes.size_owner();
  for (uint32_t i = 0; i < n; ++i) {
    Node& node = nodes[i];
    for (auto* a :
         {&node.calls, &node.subrs, &node.incl_ticks, &node.excl_ticks, &node.flops, &node.bytes,
          &node.warm_calls, &node.timed, &node.timed_incl, &node.timed_excl}) {
      a->store(0, std::memory_order_relaxed);
    }
    node.timed_sq.store(0, std::memory_order_relaxed);
    node.timing = AdaptiveTiming::kWarmUp;  // the child's own calls decide again
    node.warm_closed = node.warm_fast = 0;
    node.mean_ticks = 0;
    for (uint32_t c = 0; c < kMaxCounters; ++c) {
      node.counter_incl[c].store(0, std::memory_order_relaxed);
      node.counter_excl[c].store(0, std::memory_order_relaxed);
    }
  }
  for (uint32_t i = 0; i < shapes.size_owner(); ++i) {
    ShapeRecord& r = shapes[i];
    for (auto* a : {&r.calls, &r.ticks, &r.flops, &r.bytes, &r.timed}) {
      a->store(0, std::memory_order_relaxed);
    }
  }
  for (uint32_t i = 0; i < comms.size_owner(); ++i) {
    comms[i].calls.store(0, std::memory_order_relaxed);
    comms[i].ticks.store(0, std::memory_order_relaxed);
  }
  for (uint32_t i = 0; i < op_shapes.size_owner(); ++i) {
    op_shapes[i].calls.store(0, std::memory_order_relaxed);
    op_shapes[i].ticks.store(0, std::memory_order_relaxed);
  }
  for (uint32_t i = 0; i < lines.size_owner(); ++i) {
    lines[i].hits.store(0, std::memory_order_relaxed);
    lines[i].ticks.store(0, std::memory_order_relaxed);
  }
}

void ThreadState::reset_counts(uint64_t now) {
  if (!restart_tree()) zero_counts();
  for (OutlierSums& o : outlier_sums) {
    for (auto* a : {&o.count, &o.incl, &o.excl}) a->store(0, std::memory_order_relaxed);
    o.sq.store(0, std::memory_order_relaxed);
    o.node.store(0, std::memory_order_relaxed);
  }
  for (auto* a : {&comm_clock.exposed, &comm_clock.overlapped, &comm_clock.inflight_ticks,
                  &comm_clock.untracked}) {
    a->store(0, std::memory_order_relaxed);
  }
  comm_clock.last = now;
  // Frames still open were entered by the parent: the child's time runs under them, but it
  // made none of those calls (a function that forked 3 children was called once, not 4 times).
  // Only the thread's root counts one, as every thread's does.
  for (uint32_t i = 0; i <= depth(); ++i) {
    StackEntry& e = stack_[i];
    e.start.store(now, std::memory_order_relaxed);
    e.child_ticks.store(0, std::memory_order_relaxed);
  }
  nodes[stack_[0].node.load(std::memory_order_relaxed)].calls.store(1, std::memory_order_relaxed);
  start_ticks_.store(now, std::memory_order_relaxed);
  end_ticks_.store(0, std::memory_order_relaxed);
  cpu_start_ns_.store(own_cpu_ns(), std::memory_order_relaxed);
  cpu_end_ns_.store(-1, std::memory_order_relaxed);
  depth_overflows.store(0);
  abandoned.store(0);
  node_overflows.store(0);
  region_mismatches.store(0);
  if (trace) trace->clear();
}

// The calling thread's own name, from the kernel (prctl), not /proc/thread-self/comm: a FILE
// opened, read and closed at every thread's end was a part of the 60 us a thread under the
// Python hook cost (4,000 short threads: 0.50-0.55 s against 0.27 s plain).
void ThreadState::read_name() {
  char name[16] = {};  // TASK_COMM_LEN, the terminating NUL included
  if (::prctl(PR_GET_NAME, name, 0, 0, 0) == 0) {
    static_assert(sizeof final_name_ >= sizeof name);
    std::memcpy(final_name_, name, sizeof name);
    final_name_[sizeof final_name_ - 1] = '\0';
  }
}

void ThreadState::mark_ended(uint64_t t, bool syscalls) {
  if (syscalls) {
    read_name();
    cpu_end_ns_.store(own_cpu_ns(), std::memory_order_relaxed);
  }
  end_ticks_.store(t, std::memory_order_release);
}

int64_t ThreadState::cpu_ns() const {
  int64_t start = cpu_start_ns_.load(std::memory_order_relaxed);
  int64_t end =
      end_ticks() != 0 ? cpu_end_ns_.load(std::memory_order_relaxed) : thread_cpu_ns(tid_);
  if (start < 0 || end < start) return -1;
  return end - start;
}

void ThreadState::sample_fpu() {
#if defined(__x86_64__)
  constexpr uint32_t kFtz = 1u << 15, kDaz = 1u << 6;
  uint32_t seen = _mm_getcsr() & (kFtz | kDaz);
  fpu_seen.store(fpu_seen.load(std::memory_order_relaxed) | seen, std::memory_order_relaxed);
#endif
}

}  // namespace sonde
