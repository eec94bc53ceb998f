// Calls a longjmp left (issue 37): a signal handler that siglongjmps out of a measured call, or
// an exception thrown through one, leaves the wrapper wherever it was. Its frame stays open, or
// was opened and never started (the suppress flag raised, the frame not yet on the stack), and
// while a suppressing routine's (BLAS) flag stays up every later call of the thread is refused.
// The thread's next wrapper call finds such frames by the stack addresses the wrappers keep:
// the cold side of open_frame, never its common path.
#pragma once

#include <cstdint>

#include "core/thread_state.hpp"

namespace sonde {

// Stack addresses further apart than this are of two stacks (a fiber's, a thread's), never one
// frame above another.
inline constexpr uintptr_t kOneStack = uintptr_t(1) << 30;

// Whether `e`, a frame on the shadow stack or just above it, was left by a jump, as seen from a
// native wrapper's call whose caller's stack address is `cfa`: `e` is a native wrapper's (its
// own stack pointer kept) and the caller lies above that wrapper on the same stack, so the call
// was not made from inside it (a call made inside it, however indirectly, has its caller
// deeper than the frame's wrapper). (A sibling called by the same caller after the jump has its
// caller's address: above the frame's wrapper, whatever either's stack arguments, unless it
// passes 25 more words on the stack than the other did; the caller's address alone, compared
// with the frame's caller's, took cblas_dgemm's 8 stack arguments for nesting.)
inline bool left_by_jump(const StackEntry& e, uintptr_t cfa) {
  return e.sp != 0 && e.sp < cfa && cfa - e.sp <= kOneStack;
}

// Whether the thread runs a signal handler on its sigaltstack: there the frames below are
// interrupted, not left, whatever the stack addresses say. A system call: the cold side only.
__attribute__((noinline, cold)) bool on_alternate_stack();

// Takes off the frames a call whose caller's stack address is `cfa` finds left: the open frames
// above it, innermost first, and the frame opened above them whose clock never started. Each
// stays counted, its time is left in its caller's (when the jump came is unknown), and it is
// counted for a note. The suppress flag is then counted again from the frames still open, so a
// jump that came while a frame closed (the flag lowered, the frame not yet off) lowers it once.
// On a signal's alternate stack nothing is judged: the frames below are interrupted, not left.
__attribute__((noinline, cold)) void drop_abandoned(ThreadState* t, uintptr_t cfa);

// open_frame's refusal, when the suppress flag is up at a native wrapper's call: whether the
// call must still be refused once what a jump left is taken off. A suppressing open frame
// refuses at once (BLAS inside BLAS), as the window does while it is closed.
__attribute__((noinline, cold)) bool still_suppressed(ThreadState* t, uintptr_t cfa);

}  // namespace sonde
