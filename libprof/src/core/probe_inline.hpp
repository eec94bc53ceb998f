// The hot half of the probe API (sonde/probe.hpp), inline, for the wrappers built into libsonde
// (wrappers/intercept.hpp): a measured call is then one function, with no call into libprof
// between the wrapper's entry and the real function's. The exported probe_* functions, which
// the Python extension reaches through the loader, are these same functions (probe.cpp).
#pragma once

#include "core/clock.hpp"
#include "core/frame_ops.hpp"
#include "core/thread_local_state.hpp"

namespace sonde::inline_probe {

ThreadState* attach_current();  // runtime/api.cpp: the thread's first measured call, out of line

// The calling thread's state, attached at its first measured call.
__attribute__((always_inline)) inline ThreadState* current() {
  ThreadState* t = t_state;
  if (__builtin_expect(t == nullptr, 0)) t = attach_current();
  return t;
}

// `cfa` and `sp`: a native wrapper's caller's stack address (__builtin_dwarf_cfa) and its own
// stack pointer (stack_pointer), 0 for other callers.
__attribute__((always_inline)) inline ThreadState* open(RoutineId routine, Nesting nesting,
                                                        uintptr_t cfa = 0, uintptr_t sp = 0) {
  ThreadState* t = current();
  return t == nullptr ? nullptr : open_frame<true>(t, routine, nesting, cfa, sp);
}

// The calling function's stack pointer, one instruction (inlined into the wrapper: its own).
__attribute__((always_inline)) inline uintptr_t stack_pointer() {
  uintptr_t sp;
#if defined(__x86_64__)
  asm volatile("mov %%rsp, %0" : "=r"(sp));
#elif defined(__aarch64__)
  asm volatile("mov %0, sp" : "=r"(sp));
#else
  sp = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
#endif
  return sp;
}

__attribute__((always_inline)) inline void start(ThreadState* t) { begin_call(t, now_ticks); }

__attribute__((always_inline)) inline void exit(ThreadState* t, const CallCost* cost,
                                                const void* call_site) {
  end_call(t, cost, call_site, now_ticks);
}

}  // namespace sonde::inline_probe
