// A thread's shadow stack of open frames. It starts with room for 256 and its owner grows it,
// up to SONDE_MAX_DEPTH, as a recursion goes deeper: a fixed stack of 256 cut off a recursion
// cProfile counted in full, and one as deep as Python allows (1,000 frames and more) would cost
// every thread its memory from the start.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "counters/counter_backend.hpp"
#include "sonde/probe.hpp"

namespace sonde {

struct StackEntry {
  std::atomic<uint32_t> node{0};
  Nesting nesting = Nesting::kChildren;
  std::atomic<uint64_t> start{0};
  std::atomic<uint64_t> child_ticks{0};  // inclusive time of completed children
  bool untimed = false;  // owner-only: adaptive timing leaves this call's clock unread
  // Owner-only: a native wrapper's own stack pointer, 0 for any other frame; a later wrapper
  // call whose caller's stack address lies above it finds this frame abandoned.
  uintptr_t sp = 0;
  // Owner-only: counts at entry and completed children's deltas (counters on).
  uint64_t counter_start[kMaxCounters] = {};
  uint64_t counter_children[kMaxCounters] = {};
};

class FrameStack {
 public:
  // Room for min(256, limit) + 1 entries (the thread's root is entry 0).
  explicit FrameStack(uint32_t limit);

  // --- owner thread, and its signal handlers ---
  StackEntry& operator[](uint32_t d) const { return entries_[d]; }
  // The deepest entry there is room for now; a frame opens at depth d + 1 only below it.
  uint32_t room() const { return room_; }
  // Doubles the room, up to the limit, copying the open frames 0..depth. False at the limit,
  // or where no memory was left: the caller then counts the call as too deep.
  bool grow(uint32_t depth);

  // --- any thread (the flusher's snapshot) ---
  // The entries as last published with their room. A block given up by a growth stays until
  // the stack goes: a reader holding it reads the frames as they were when it grew.
  struct View {
    const StackEntry* entries;
    uint32_t room;
  };
  View view() const {
    const Block* b = published_.load(std::memory_order_acquire);
    return {b->entries.get(), b->room};
  }
  // The thread's root entry, whose start the flusher moves as a collection window opens. A
  // growth racing that store may copy the old start: the root's time is then counted from
  // the thread's start, as it was before the window.
  StackEntry& root() const { return published_.load(std::memory_order_acquire)->entries[0]; }

 private:
  // Each growth's block owns the one it replaced: the chain goes with the stack.
  struct Block {
    std::unique_ptr<StackEntry[]> entries;
    uint32_t room = 0;
    std::unique_ptr<Block> older;
  };

  // The owner's two words come last, so that ThreadState's depth_ and suppress, which
  // open_frame reads with them on every call, follow them as they followed the fixed stack's
  // pointer and limit (first, they put 16 cold bytes between: +0.4 ns a call, 15.55 -> 15.95).
  std::unique_ptr<Block> newest_;
  std::atomic<Block*> published_{nullptr};
  StackEntry* entries_ = nullptr;
  uint32_t room_ = 0;
  uint32_t limit_ = 0;
};

}  // namespace sonde
