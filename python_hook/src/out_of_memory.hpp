// The Python hooks when the process has no memory left for them (a program at its `ulimit -v`).
//
// CPython calls the hooks from C: a C++ exception leaving one (a std::bad_alloc of a routine's
// name, of a frame stack's growth) ended the process in std::terminate (SIGABRT), where the
// program alone ran on or raised its own MemoryError (a red-team run of a generator program on
// 3.12 at `ulimit -v 27500`). Every hook catches instead, and the first that does stops the
// recording of Python frames for the rest of the process: a frame half entered would leave its
// thread's stacks unbalanced. Native calls are still recorded (libprof allocates nothing that
// can throw on their path), and a note says from when the Python frames are missing.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <new>

namespace sonde::python {

// Whether the hooks have stopped for want of memory.
inline bool g_starved = false;  // under the GIL
inline bool starved() { return __builtin_expect(g_starved, 0); }

// Stops them, and says so in a run note made by the next flush that has memory for it. Never
// throws.
void starve_hooks() noexcept;

// What a hook that CPython calls runs: `body()`, or `otherwise` once the hooks have stopped or
// where `body` throws (which stops them).
template <class R, class F>
inline R or_starve(R otherwise, F&& body) noexcept {
  if (starved()) return otherwise;
  try {
    return body();
  } catch (...) {
    starve_hooks();
    return otherwise;
  }
}

// libstdc++'s per-thread exception state, made while there is memory: in an extension loaded
// by dlopen it is dynamic TLS, allocated at a thread's first throw, and glibc ends the process
// (exit 127) where that allocation fails. Once per thread, from its first hook call.
void prepare_thread_for_exceptions() noexcept;

// A function of the _sonde module as CPython calls it: a C++ exception becomes a Python one
// (MemoryError for a std::bad_alloc) instead of leaving through CPython's C frames. The
// launcher's atexit calls (name_helpers, teardown_begins) run where a program at its memory
// limit has none left.
template <auto F, class... A>
PyObject* no_throw(PyObject* self, A... args) noexcept {
  try {
    return F(self, args...);
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  } catch (...) {
    PyErr_SetString(PyExc_SystemError, "sonde: an error inside its Python hook");
    return nullptr;
  }
}
template <PyObject* (*F)(PyObject*, PyObject*)>
constexpr PyCFunction guarded = no_throw<F, PyObject*>;

}  // namespace sonde::python
