#include "core/frame_stack.hpp"

#include <algorithm>
#include <new>

namespace sonde {
namespace {

constexpr uint32_t kFirstRoom = 256;

void copy_entry(const StackEntry& from, StackEntry& to) {
  to.node.store(from.node.load(std::memory_order_relaxed), std::memory_order_relaxed);
  to.nesting = from.nesting;
  to.start.store(from.start.load(std::memory_order_relaxed), std::memory_order_relaxed);
  to.child_ticks.store(from.child_ticks.load(std::memory_order_relaxed), std::memory_order_relaxed);
  to.untimed = from.untimed;
  to.sp = from.sp;
  std::copy(std::begin(from.counter_start), std::end(from.counter_start), to.counter_start);
  std::copy(std::begin(from.counter_children), std::end(from.counter_children),
            to.counter_children);
}

}  // namespace

FrameStack::FrameStack(uint32_t limit) : limit_(limit) {
  uint32_t room = std::min(limit, kFirstRoom);
  auto b = std::make_unique<Block>();
  b->entries = std::make_unique<StackEntry[]>(size_t(room) + 1);
  b->room = room;
  entries_ = b->entries.get();
  room_ = room;
  published_.store(b.get(), std::memory_order_release);
  newest_ = std::move(b);
}

bool FrameStack::grow(uint32_t depth) {
  if (room_ >= limit_) return false;
  uint32_t room = room_ > limit_ / 2 ? limit_ : room_ * 2;
  // No exception may cross the host's frames: without memory, the call is one too deep.
  auto* b = new (std::nothrow) Block;
  if (b == nullptr) return false;
  b->entries.reset(new (std::nothrow) StackEntry[size_t(room) + 1]);
  if (!b->entries) {
    delete b;
    return false;
  }
  b->room = room;
  for (uint32_t d = 0; d <= depth && d <= room_; ++d) copy_entry(entries_[d], b->entries[d]);
  b->older = std::move(newest_);
  newest_.reset(b);
  published_.store(b, std::memory_order_release);
  // A signal handler of this thread (the sampler) reads entries_ and room_: it finds either
  // block whole, each holding the open frames.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  entries_ = b->entries.get();
  std::atomic_signal_fence(std::memory_order_seq_cst);
  room_ = room;
  return true;
}

}  // namespace sonde
