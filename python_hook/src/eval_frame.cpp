// eval_frame_abi.hpp first: it sets Py_BUILD_CORE for 3.11's frames before Python.h is read.
// clang-format off
#include "eval_frame_abi.hpp"
#include "eval_frame.hpp"
// clang-format on

#ifdef SONDE_EVAL_FRAME
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "getitem_guard.hpp"
#endif

#include "code_table.hpp"
#include "frames.hpp"
#include "greenlets.hpp"
#include "out_of_memory.hpp"
#include "per_thread.hpp"
#include "sonde/probe.hpp"
#include "subnormals.hpp"

namespace sonde::python {

#ifdef SONDE_EVAL_FRAME

namespace {

using abi::Frame;

// The evaluator beneath sonde's: CPython's default, or a hook installed before (a debugger).
_PyFrameEvalFunction g_beneath = nullptr;
// sonde's evaluator is in the interpreter's chain (installed, and not taken out by stop()).
bool g_in_chain = false;
// Off after uninstall_eval_frame when another hook was installed above sonde's and keeps
// calling it: frames then pass straight through.
bool g_recording = false;
// The hook is out of the interpreter while a frame deep in its thread's C stack runs.
bool g_suspended = false;
// How many frames ran so (each with everything it called): said in a note at stop. Under the
// GIL, as every use of the hook's globals.
uint64_t g_unhooked = 0;

struct ThreadHook {
  uintptr_t stack_floor = 0;  // below this address, frames run without the hook; 0: not known
  int skip = 0;               // frames not to record (the launcher's own)
  bool in_machinery = false;  // the innermost hooked frame is the import machinery's
  const void* subnormal_frame = nullptr;  // the innermost whose subnormal check waits for its end
};
// A thread's, reached in one instruction (per_thread.hpp).
ThreadHook& thread_hook() { return PerThread<ThreadHook>::get(); }

// With the hook, every Python call takes a C frame of the evaluator, where 3.11's interpreter
// alone inlines Python-to-Python calls and takes none (and 3.10's takes a smaller one): a
// recursion that the program allowed far beyond the default limit would overflow the C stack
// under sonde only. So the hook keeps a quarter of the thread's stack (at most 1 MiB) free on
// 3.11, whose frames beneath it then take no C stack; on 3.10, whose frames still do, half.
//
// evaluate()'s own stack frame is what the hook adds to every Python call's C stack on 3.10, so
// what it does not need across the call lives in functions of their own: stack_floor (its
// pthread_attr_t), open_frame and close_frame. A red-team recursion that ran 21,000 deep alone
// died of SIGSEGV from 15,500 under sonde, with evaluate's frame 160 bytes (gcc 12 -O2; now 64)
// and a quarter kept.
//
// On 3.11, whose frames beneath the hook take no C stack, open_frame and close_frame stay inlined:
// out of line they cost every Python call two calls more (python3.11.default 0.334-0.380x
// cProfile against 0.315-0.340x, five alternating pairs).
#if PY_VERSION_HEX < 0x030B0000
#define SONDE_OFF_EVALUATE __attribute__((noinline))
#else
#define SONDE_OFF_EVALUATE
#endif
__attribute__((noinline)) uintptr_t stack_floor() {
  pthread_attr_t attr;
  void* low = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &low, &size);
    pthread_attr_destroy(&attr);
  }
  if (low == nullptr || size == 0) return 1;  // unknown: no floor
#if PY_VERSION_HEX < 0x030B0000
  return reinterpret_cast<uintptr_t>(low) + size / 2;
#else
  return reinterpret_cast<uintptr_t>(low) + std::min<size_t>(size / 4, size_t(1) << 20);
#endif
}

// Which sonde frame, if any, an evaluation opens. A generator or coroutine frame is evaluated
// at its first next()/send() and again at every resumption after a yield or await, and for
// throw()/close() (eval_frame_abi.hpp says which is which): the resumptions are probe_resume,
// so a generator is one call however often it resumes.
ThreadState* open_frame_of(ThreadHook& hook, Frame* frame, int throwflag);

// A std::bad_alloc never crosses into CPython's C frames (out_of_memory.hpp).
SONDE_OFF_EVALUATE ThreadState* open_frame(ThreadHook& hook, Frame* frame, int throwflag) {
  if (!g_recording) return nullptr;
  return or_starve<ThreadState*>(nullptr, [&] { return open_frame_of(hook, frame, throwflag); });
}

inline ThreadState* open_frame_of(ThreadHook& hook, Frame* frame, int throwflag) {
  getitem_guard_entered(frame);
  PyCodeObject* code = abi::frame_code(frame);
  abi::Entry entry = abi::Entry::kCall;
  if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
    entry = abi::generator_entry(frame, throwflag);
    if (entry == abi::Entry::kNothing) return nullptr;
  }
  bool machinery = false;
  RoutineId id = 0;
  // Inside an import folded whole, a frame is not even looked up: registering the thousands of
  // functions a large import runs (import torch: 3,400) would cost what folding saves.
  bool folded = hook.in_machinery && fold_imports();
  if (!folded) {
    id = code_routine(code, &machinery);
    folded = folded_into_import(hook.in_machinery, machinery);
  }
  // evaluate() restores the caller's when the frame leaves; a folded frame is inside the import
  hook.in_machinery = machinery || folded;
  if (hook.skip > 0) {
    --hook.skip;
    return nullptr;
  }
  if (folded) return nullptr;  // within the import its outermost machinery frame opened
  if (entry == abi::Entry::kResume) return probe_resume(id, Nesting::kChildren);
  // Checked before the clock starts, as libsonde's check of GEMM operands is.
  if (subnormal_sample_due() &&
      check_subnormal_arguments(id, code, abi::frame_slots(frame), argument_slots(code), frame))
    hook.subnormal_frame = frame;
  return probe_enter(id, Nesting::kChildren);
}

// Every Python frame evaluation in the interpreter comes here. The sonde frame opened before is
// closed after, on the same C stack, whatever way the frame left: return, yield, or an exception
// (a NULL result). Frames that were running when the hook was installed never come here, so
// they are never closed either.
PyObject* evaluate(PyThreadState* tstate, Frame* frame, int throwflag);

// Deep in the C stack: this frame and everything it calls run without the hook, so 3.11's
// interpreter inlines their Python calls again (3.10's takes C frames either way, fewer without
// sonde's). They are not recorded (their time goes to the
// recorded frame above them), nor are other threads' calls made meanwhile; the hook comes back
// when this frame returns.
PyObject* evaluate_unhooked(PyThreadState* tstate, Frame* frame, int throwflag) {
  PyInterpreterState* interp = tstate->interp;
  _PyInterpreterState_SetEvalFrameFunc(interp, g_beneath);
  g_suspended = true;
  ++g_unhooked;
  PyObject* result = g_beneath(tstate, frame, throwflag);
  g_suspended = false;
  if (g_in_chain && _PyInterpreterState_GetEvalFrameFunc(interp) == g_beneath) {
    _PyInterpreterState_SetEvalFrameFunc(interp, evaluate);
  }
  return result;
}

// The frame has left: its sonde frame closed, the hook's state as it was before it.
SONDE_OFF_EVALUATE void close_frame(ThreadState* t, Frame* frame, PyObject* result,
                                    bool in_machinery) {
  ThreadHook& hook = thread_hook();
  if (t != nullptr) {
    // Refused at the recursion check (a RecursionError), the frame never ran: no call.
    if (__builtin_expect(result == nullptr, 0) && abi::not_started(frame))
      probe_cancel(t);
    else
      probe_exit_frame(t);
  }
  or_starve(false, [&] {
    if (__builtin_expect(hook.subnormal_frame == frame, 0))
      hook.subnormal_frame = settle_subnormal_arguments(frame);
    // The outermost frame of an import has returned.
    if (__builtin_expect(hook.in_machinery && !in_machinery, 0) && !greenlets_followed())
      greenlets_import_ended();
    return true;
  });
  hook.in_machinery = in_machinery;
  getitem_guard_returned(frame, result);
}

PyObject* evaluate(PyThreadState* tstate, Frame* frame, int throwflag) {
  ThreadHook& hook = thread_hook();
  if (hook.stack_floor == 0) {  // this thread's first frame
    hook.stack_floor = stack_floor();
    trace_lines_on_this_thread();
  }
  if (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) < hook.stack_floor) {
    return evaluate_unhooked(tstate, frame, throwflag);
  }
  bool in_machinery = hook.in_machinery;
  ThreadState* t = open_frame(hook, frame, throwflag);
  PyObject* result = g_beneath(tstate, frame, throwflag);
  close_frame(t, frame, result, in_machinery);
  return result;
}

PyInterpreterState* interpreter() { return PyThreadState_GetInterpreter(PyThreadState_Get()); }

}  // namespace

bool eval_frame_available() { return true; }

bool install_eval_frame() {
  if (!code_table_init()) return false;
  PyInterpreterState* interp = interpreter();
  // Still in the chain (stop() found another hook above it): recording again is enough.
  if (!g_in_chain) {
    g_beneath = _PyInterpreterState_GetEvalFrameFunc(interp);
    _PyInterpreterState_SetEvalFrameFunc(interp, evaluate);
    g_in_chain = true;
  }
  getitem_guard_start();
  g_recording = true;
  return true;
}

void eval_frame_skip_calls(int n) { thread_hook().skip = n; }

bool& eval_frame_in_machinery() { return thread_hook().in_machinery; }

void uninstall_eval_frame() {
  g_recording = false;
  if (g_unhooked > 0) {
    // Unsaid before, so a deep recursion's calls went missing from the counts with no trace
    // (3.10: 13,622 of cProfile's 15,902 with SONDE_MAX_DEPTH=65536; a red-team find).
    std::string note = std::to_string(g_unhooked) +
                       (g_unhooked == 1 ? " Python frame" : " Python frames") +
                       " ran unrecorded with everything beneath, within a quarter of the thread's "
                       "C stack from its end (a deep recursion): the time is the caller's, the "
                       "calls are not counted (docs/python.md, \"Deep recursion\")";
    sonde::add_run_note("depth", note.c_str());
    g_unhooked = 0;
  }
  PyInterpreterState* interp = interpreter();
  if (g_in_chain && !g_suspended && _PyInterpreterState_GetEvalFrameFunc(interp) == g_beneath) {
    // The program set CPython's frame evaluation back to what sonde found (PEP 523: how a
    // frame-evaluation tool, a debugger's or a JIT's, switches itself off): sonde's hook went
    // with it, and the frames after that were not recorded, unsaid (a red-team find). One
    // that chains above sonde's keeps it, and is no loss.
    sonde::add_run_note("python",
                        "the program set CPython's frame evaluation function (PEP 523) back to "
                        "the one it had before sonde's, taking sonde's hook away: Python frames "
                        "run after that were not recorded (native calls were)");
    g_in_chain = false;
  } else if (g_in_chain && _PyInterpreterState_GetEvalFrameFunc(interp) == evaluate) {
    _PyInterpreterState_SetEvalFrameFunc(interp, g_beneath);
    g_in_chain = false;
  } else if (g_suspended) {
    g_in_chain = false;  // out already: it stays out when the deep frame returns
  }
}

#else  // not CPython 3.10 or 3.11

bool eval_frame_available() { return false; }

bool install_eval_frame() {
  PyErr_SetString(PyExc_RuntimeError,
                  "sonde's frame-evaluation hook is written for CPython 3.10 and 3.11 only");
  return false;
}

void eval_frame_skip_calls(int) {}

bool& eval_frame_in_machinery() {
  thread_local bool unused = false;
  return unused;
}

void uninstall_eval_frame() {}

#endif

}  // namespace sonde::python
