// Python frames into sonde's per-thread stack, the `--builtins` way: a C profile function (the
// cheapest hook that sees C functions before 3.12's sys.monitoring) turns calls and returns of
// Python functions and C builtins into probe_enter / probe_exit, so a BLAS call appears under
// the frame that made it. The default hook is eval_frame.hpp's; both share the code routines.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>
#include <vector>

#include "sonde/probe.hpp"

namespace sonde::python {

// The routine of a code object: registered on first sight as file.py:LINE(function), then read
// back from code_table.hpp's table (one hash probe). Needs code_table_init first; holds the GIL.
RoutineId code_routine(PyCodeObject* code);
// The same, with `machinery` set for a frame of the import machinery (importlib's frozen
// modules), whose routine is import_routine(): a hook opens it for the outermost such frame and
// nothing for those beneath it, C calls included, so one import is one call of "<import>".
RoutineId code_routine(PyCodeObject* code, bool* machinery);
RoutineId import_routine();
// Whether everything an import runs (module bodies, what they call) is folded into its
// "<import>" node too (the default), or recorded beneath it (SONDE_PYTHON_IMPORTS=1, start()'s
// imports=True). Set by start() with the GIL held, before any hook is installed.
void set_fold_imports(bool fold);
bool fold_imports();
// Whether a frame entered where the innermost open frame is `inside_import` (the import
// machinery's, or folded into an import) opens nothing: machinery frames beneath machinery
// always, any frame when imports are folded whole.
inline bool folded_into_import(bool inside_import, bool machinery) {
  return inside_import && (machinery || fold_imports());
}
// The name a Python routine is registered under (pprof/cProfile style: file.py:LINE(function)).
std::string code_display_name(PyCodeObject* code);
// The routine of a C function that `--builtins` records: a PyCFunction (`len`, a bound
// `numpy.ndarray.dot`), or a C method descriptor called with `self_arg` (nullptr: no argument)
// first. Returns false, leaving `id` alone, for any other callable. Holds the GIL.
bool c_callable_routine(PyObject* callable, PyObject* self_arg, RoutineId* id);
// Whether c_callable_routine takes `callable`: its type alone, nothing looked up.
inline bool is_c_callable(PyObject* callable, PyObject* self_arg) {
  return PyCFunction_Check(callable) ||
         (Py_TYPE(callable) == &PyMethodDescr_Type && self_arg != nullptr);
}

// The profile hook's record of one open Python frame or C call on its thread: whether it opened
// a sonde frame (the thread's state, or nullptr: frames running when the hook was installed
// return without having been entered, and the depth limit can refuse one), and whether it is
// the import machinery's (or a C call it made), beneath which machinery frames open nothing.
struct OpenedFrame {
  ThreadState* thread;
  bool machinery;
};
// This thread's, innermost last: a greenlet switch sets them aside with its sonde frames.
std::vector<OpenedFrame>& profile_hook_frames();

// Installs the profile function on every existing thread and, through threading.setprofile,
// on every thread started later; C functions are recorded only with `builtins`. Returns false
// with a Python exception set.
bool install_all_threads(bool builtins);
// Times the source lines of functions whose name or qualified name matches one of `patterns`
// (fnmatch), on every thread. Call after install_all_threads; empty: no line timing.
bool install_line_tracing(const std::vector<std::string>& patterns);
// The next `n` calls on this thread are not recorded (nor their returns): the launcher's own.
void skip_calls(int n);
// Whether a thread of this interpreter no longer has sonde's profile function: a profiler the
// program ran (cProfile, yappi) takes the one slot there is, and that thread's Python frames go
// unrecorded from then on. Holds the GIL.
bool profile_function_replaced();
// Whether the program replaced the hook threading gives the threads it starts (its own
// threading.setprofile): those started after that never had sonde's profile function.
bool threading_hook_replaced();
// A thread threading did not start (_thread's, a C library's calling into Python) has no
// --lines tracer: at its first hook call, where line tracing is on and the thread has no trace
// function, it gets sonde's. `started`: called from a frame's start event, after the tracing
// tools had it (sys.monitoring), its call event to pass on. Holds the GIL.
void trace_lines_on_this_thread(bool started = false);
// Removes it from every thread, and the line tracing too.
void uninstall_all_threads();
// Removes the line tracing alone (the frame-evaluation hook's stop).
void uninstall_line_tracing();

}  // namespace sonde::python
