// A workaround for CPython 3.11.0 to 3.11.3 (gh-104405, fixed in 3.11.4), for the
// frame-evaluation hook (eval_frame.hpp): once `obj[i]` is specialised into
// BINARY_SUBSCR_GETITEM, the interpreter pushes the Python __getitem__'s frame itself, without
// the hook: 7 calls of 8000 were recorded. The specialiser takes only a function whose version
// fits in 16 bits, so sonde gives every function that could be a __getitem__ (two positional
// parameters) a version of its own above that before a subscript can be specialised on it:
// when the hook sees it called, when the class or module body that defines it returns, and, for
// classes made before start(), at start. Versions only key the interpreter's caches: the call
// specialisations (which the hook already turns off) take any, and sonde's count down from the
// top where CPython's count up from 1. CPython 3.10 has no specialising interpreter: nothing to
// do there.
#pragma once

#include "eval_frame_abi.hpp"

#ifdef SONDE_EVAL_FRAME

namespace sonde::python {

#if SONDE_EVAL_FRAME == 311

extern bool g_getitem_guard;  // on where the interpreter has the bug, from the hook's install
void guard_function(PyFunctionObject* func);
void guard_namespace(PyObject* ns);

// At the hook's install: on for 3.11.0-3.11.3, and the classes made so far guarded.
void getitem_guard_start();
// A frame is entered: its function is guarded.
inline void getitem_guard_entered(abi::Frame* frame) {
  if (__builtin_expect(g_getitem_guard, 0)) guard_function(frame->f_func);
}
// A frame returned `result`: a class or module body's namespace holds the functions it defined.
// The frame is cleared by the caller, after this.
inline void getitem_guard_returned(abi::Frame* frame, PyObject* result) {
  if (__builtin_expect(g_getitem_guard, 0) && result != nullptr &&
      (frame->f_code->co_flags & CO_OPTIMIZED) == 0)
    guard_namespace(frame->f_locals);
}

#else

inline void getitem_guard_start() {}
inline void getitem_guard_entered(abi::Frame*) {}
inline void getitem_guard_returned(abi::Frame*, PyObject*) {}

#endif

}  // namespace sonde::python

#endif  // SONDE_EVAL_FRAME
