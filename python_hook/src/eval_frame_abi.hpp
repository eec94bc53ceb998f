// The frames the frame-evaluation hook (eval_frame.hpp) is handed, as each CPython version lays
// them out: the only version-specific part of the hook. CPython 3.10 hands it a PyFrameObject
// (public), 3.11 an _PyInterpreterFrame (internal, so this header defines Py_BUILD_CORE there
// and must come before any other include of Python.h). Elsewhere SONDE_EVAL_FRAME stays
// undefined and the hook is not built: 3.12+ record through sys.monitoring (monitoring.hpp).
#pragma once

#include <patchlevel.h>

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define SONDE_EVAL_FRAME 311
#define Py_BUILD_CORE 1
#elif PY_VERSION_HEX >= 0x030A0000 && PY_VERSION_HEX < 0x030B0000
#define SONDE_EVAL_FRAME 310
#endif

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if SONDE_EVAL_FRAME == 311
#include <internal/pycore_frame.h>
#include <opcode.h>
#elif SONDE_EVAL_FRAME == 310
#include <frameobject.h>  // PyFrameObject's fields
#endif

#ifdef SONDE_EVAL_FRAME

namespace sonde::python::abi {

// What one evaluation of a frame is, as a profile function would count it.
enum class Entry {
  kCall,     // a function's call, or a generator's first next()/send()
  kResume,   // a generator or coroutine going on after a yield or await, or thrown into
  kNothing,  // no call of the function's body (below)
};

#if SONDE_EVAL_FRAME == 311

using Frame = _PyInterpreterFrame;

inline PyCodeObject* frame_code(Frame* frame) { return frame->f_code; }
// Its arguments and locals, in the code's slot order.
inline PyObject* const* frame_slots(Frame* frame) { return frame->localsplus; }
// Before its first instruction: a frame CPython refused at its recursion check never gets past.
inline bool not_started(Frame* frame) { return frame->prev_instr < _PyCode_CODE(frame->f_code); }

// A generator or coroutine is evaluated once when it is called, up to RETURN_GENERATOR (which
// makes the generator object: not the generator's call), then at its first next()/send() (the
// call, as the profile hook counts it), then at every resumption after a yield or await, and
// for throw()/close(). A throw() or close() before the first next() (also the close of a
// generator dropped unstarted) raises at once, before any instruction of the body: no call, and
// no resumption of a call that never was (it made a routine of 0 calls and some time, the only
// version to do so: a red-team find).
inline Entry generator_entry(Frame* frame, int throwflag) {
  if (not_started(frame)) return Entry::kNothing;
  if (_Py_OPCODE(*frame->prev_instr) == RETURN_GENERATOR)
    return throwflag == 0 ? Entry::kCall : Entry::kNothing;
  return Entry::kResume;
}

#else  // 3.10

using Frame = PyFrameObject;

inline PyCodeObject* frame_code(Frame* frame) { return frame->f_code; }
inline PyObject* const* frame_slots(Frame* frame) { return frame->f_localsplus; }
// f_lasti is the last instruction run, -1 before the first (the recursion check comes first).
inline bool not_started(Frame* frame) { return frame->f_lasti < 0; }

// Calling a generator function makes the generator without evaluating its frame; each next(),
// send(), throw() or close() evaluates it. The first is the call. A throw() or close() before
// it (3.10 closes every generator dropped unstarted) raises at once, before any instruction:
// no call of the body.
inline Entry generator_entry(Frame* frame, int throwflag) {
  if (!not_started(frame)) return Entry::kResume;
  return throwflag == 0 ? Entry::kCall : Entry::kNothing;
}

#endif

}  // namespace sonde::python::abi

#endif  // SONDE_EVAL_FRAME
