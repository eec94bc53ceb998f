#include "core/left_frames.hpp"

#include <signal.h>

namespace sonde {

bool on_alternate_stack() {
  stack_t on{};
  return sigaltstack(nullptr, &on) == 0 && (on.ss_flags & SS_ONSTACK) != 0;
}

namespace {

// What the frames open at depths 1 to `depth` add to the suppress flag.
uint32_t suppressing(const ThreadState* t, uint32_t depth) {
  uint32_t n = 0;
  for (uint32_t d = 1; d <= depth; ++d) n += t->stack_[d].nesting == Nesting::kSuppress;
  return n;
}

}  // namespace

void drop_abandoned(ThreadState* t, uintptr_t cfa) {
  uint32_t depth = t->depth();
  uint32_t keep = depth;
  while (keep > 0 && left_by_jump(t->stack_[keep], cfa)) --keep;
  // The flag holds more than the open frames: the frame above them raised it and a jump came
  // before start_frame put it on the stack. Left with the frames below it, or by itself.
  uint32_t raised = t->suppress & ~ThreadState::kWindowClosed;
  bool unstarted = depth < t->stack_.room() && raised > suppressing(t, depth) &&
                   (keep < depth || left_by_jump(t->stack_[depth + 1], cfa));
  if (keep == depth && !unstarted) return;
  if (on_alternate_stack()) return;
  // The stack first: a jump out of this leaves a flag above what the stack holds, which the
  // next call finds as it finds an unstarted frame. The count last: such a jump leaves a call
  // uncounted rather than counted twice.
  t->depth_.store(keep, std::memory_order_release);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t->suppress = (t->suppress & ThreadState::kWindowClosed) | suppressing(t, keep);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  bump(t->abandoned, depth - keep + unstarted);
}

bool still_suppressed(ThreadState* t, uintptr_t cfa) {
  // Nothing opens above a suppressing frame: it alone holds the flag.
  if (t->stack_[t->depth()].nesting == Nesting::kSuppress) return true;
  drop_abandoned(t, cfa);
  return t->suppress != 0 && (t->suppress != ThreadState::kWindowClosed || t->held_back());
}

}  // namespace sonde
