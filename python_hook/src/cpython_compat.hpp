// The C-API pieces that differ between the CPythons the hook is built for (3.10 to 3.13), for
// the code outside the frame-evaluation hook's frames (eval_frame_abi.hpp): kept here so that
// the rest reads the same on every version.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace sonde::python {

// A code object's bytecode (a new reference; nullptr with an exception set): 3.10 keeps it as
// co_code, 3.11+ make it on demand and cache it.
inline PyObject* code_bytes(PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030B0000
  return PyCode_GetCode(code);
#else
  Py_INCREF(code->co_code);
  return code->co_code;
#endif
}

// The function's qualified name (Class.method) where the code object has it (3.11+, borrowed);
// 3.10 keeps it on the function object alone, which a frame does not lead to: nullptr.
inline PyObject* code_qualname(PyCodeObject* code) {
#if PY_VERSION_HEX >= 0x030B0000
  return code->co_qualname;
#else
  (void)code;
  return nullptr;
#endif
}

#if PY_VERSION_HEX < 0x030C0000
// Whether thread `t` is running a Python frame (asked where the profile function is sonde's
// default or fallback hook: before 3.12).
inline bool runs_python_frame(PyThreadState* t) {
#if PY_VERSION_HEX >= 0x030B0000
  return t->cframe != nullptr && t->cframe->current_frame != nullptr;
#else
  return t->frame != nullptr;
#endif
}
#endif

}  // namespace sonde::python
