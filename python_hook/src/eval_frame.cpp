#include <patchlevel.h>

// The frame struct is internal to CPython and changes with every minor version: the hook is
// written for 3.11's, and other versions get the profile hook (3.12+ should use sys.monitoring).
#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define SONDE_EVAL_FRAME 1
#define Py_BUILD_CORE 1
#endif

#include "eval_frame.hpp"

#ifdef SONDE_EVAL_FRAME
#include <internal/pycore_frame.h>
#include <opcode.h>
#include <pthread.h>

#include <algorithm>
#include <cstdint>
#include <unordered_set>
#include <vector>
#endif

#include "code_table.hpp"
#include "frames.hpp"
#include "greenlets.hpp"
#include "sonde/probe.hpp"
#include "subnormals.hpp"

namespace sonde::python {

#ifdef SONDE_EVAL_FRAME

namespace {

// The evaluator beneath sonde's: CPython's default, or a hook installed before (a debugger).
_PyFrameEvalFunction g_beneath = nullptr;
// sonde's evaluator is in the interpreter's chain (installed, and not taken out by stop()).
bool g_in_chain = false;
// Off after uninstall_eval_frame when another hook was installed above sonde's and keeps
// calling it: frames then pass straight through.
bool g_recording = false;
// The hook is out of the interpreter while a frame deep in its thread's C stack runs.
bool g_suspended = false;

// CPython 3.11.0 to 3.11.3 (gh-104405, fixed in 3.11.4): once `obj[i]` is specialised into
// BINARY_SUBSCR_GETITEM, the interpreter pushes the Python __getitem__'s frame itself, without
// the hook: 7 calls of 8000 were recorded. The specialiser takes only a function whose version
// fits in 16 bits, so sonde gives every function that could be a __getitem__ (two positional
// parameters) a version of its own above that before a subscript can be specialised on it:
// when the hook sees it called, when the class or module body that defines it returns, and, for
// classes made before start(), at start. Versions only key the interpreter's caches: the call
// specialisations (which the hook already turns off) take any, and sonde's count down from the
// top where CPython's count up from 1.
bool g_guard_getitem = false;
uint32_t g_next_version = UINT32_MAX;
constexpr uint32_t kLastVersion = 0x80000000u;  // then the guard stops: 2^31 functions

void guard_function(PyFunctionObject* func) {
  if (func->func_version > 0xFFFF || g_next_version < kLastVersion) return;
  if (reinterpret_cast<PyCodeObject*>(func->func_code)->co_argcount == 2) {
    func->func_version = g_next_version--;
  }
}

void guard_namespace(PyObject* ns) {
  if (ns == nullptr || !PyDict_Check(ns)) return;
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(ns, &pos, &key, &value)) {
    if (PyFunction_Check(value)) guard_function(reinterpret_cast<PyFunctionObject*>(value));
  }
}

// Every class made before start() (whose subscripts may be specialised already): a walk of
// object's subclasses.
void guard_existing_classes() {
  // type's own method, not one a metaclass may define in Python.
  PyObject* subclasses_of =
      PyObject_GetAttrString(reinterpret_cast<PyObject*>(&PyType_Type), "__subclasses__");
  if (subclasses_of == nullptr) {
    PyErr_Clear();
    return;
  }
  std::vector<PyObject*> todo{reinterpret_cast<PyObject*>(&PyBaseObject_Type)};
  std::unordered_set<PyObject*> seen;
  while (!todo.empty()) {
    PyObject* type = todo.back();
    todo.pop_back();
    if (!seen.insert(type).second) continue;
    PyObject* dict = reinterpret_cast<PyTypeObject*>(type)->tp_dict;
    PyObject* getitem = dict != nullptr ? PyDict_GetItemString(dict, "__getitem__") : nullptr;
    if (getitem != nullptr && PyFunction_Check(getitem)) {
      guard_function(reinterpret_cast<PyFunctionObject*>(getitem));
    }
    PyObject* subclasses = PyObject_CallOneArg(subclasses_of, type);
    if (subclasses == nullptr || !PyList_Check(subclasses)) {
      PyErr_Clear();
      Py_XDECREF(subclasses);
      continue;
    }
    // Borrowed: a class lives on in its base's list while this walk holds the GIL.
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(subclasses); ++i) {
      todo.push_back(PyList_GET_ITEM(subclasses, i));
    }
    Py_DECREF(subclasses);
  }
  Py_DECREF(subclasses_of);
}

struct ThreadHook {
  uintptr_t stack_floor = 0;  // below this address, frames run without the hook; 0: not known
  int skip = 0;               // frames not to record (the launcher's own)
  bool in_machinery = false;  // the innermost hooked frame is the import machinery's
  const void* subnormal_frame = nullptr;  // the innermost whose subnormal check waits for its end
};
thread_local ThreadHook t_hook;
// _sonde is dlopened, so t_hook costs a __tls_get_addr call per access; an initial-exec pointer
// is one instruction (8 bytes of the static TLS glibc keeps for dlopened modules), as in
// monitoring.cpp. Pointed at t_hook on the thread's first frame.
thread_local ThreadHook* t_hook_fast __attribute__((tls_model("initial-exec"))) = nullptr;

ThreadHook& thread_hook() {
  ThreadHook* h = t_hook_fast;
  if (__builtin_expect(h == nullptr, 0)) h = t_hook_fast = &t_hook;
  return *h;
}

// With the hook, every Python call takes a C frame of the evaluator, where the interpreter
// alone inlines Python-to-Python calls and takes none: a recursion that the program allowed far
// beyond the default limit would overflow the C stack under sonde only. So the hook keeps a
// quarter of the thread's stack (at most 1 MiB) free.
uintptr_t stack_floor() {
  pthread_attr_t attr;
  void* low = nullptr;
  size_t size = 0;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    pthread_attr_getstack(&attr, &low, &size);
    pthread_attr_destroy(&attr);
  }
  if (low == nullptr || size == 0) return 1;  // unknown: no floor
  return reinterpret_cast<uintptr_t>(low) + std::min<size_t>(size / 4, size_t(1) << 20);
}

// Which sonde frame, if any, an evaluation opens. A generator or coroutine is evaluated once
// when it is called, up to RETURN_GENERATOR (which makes the generator object), then at its
// first next()/send() (the call, as the profile hook counts it), then at every resumption after
// a yield or await, and for throw()/close(): those are probe_resume, so a generator is one call
// however often it resumes.
ThreadState* open_frame(ThreadHook& hook, _PyInterpreterFrame* frame, int throwflag) {
  if (!g_recording) return nullptr;
  if (g_guard_getitem) guard_function(frame->f_func);
  PyCodeObject* code = frame->f_code;
  bool resumed = false;
  if (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) {
    // A new frame stands before its first instruction: this is the call making the generator.
    if (frame->prev_instr < _PyCode_CODE(code)) return nullptr;
    // Its first real entry resumes after RETURN_GENERATOR; later ones after a YIELD_VALUE.
    resumed = throwflag != 0 || _Py_OPCODE(*frame->prev_instr) != RETURN_GENERATOR;
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
  if (resumed) return probe_resume(id, Nesting::kChildren);
  // Checked before the clock starts, as libsonde's check of GEMM operands is.
  if (subnormal_sample_due() &&
      check_subnormal_arguments(id, code, frame->localsplus, argument_slots(code), frame))
    hook.subnormal_frame = frame;
  return probe_enter(id, Nesting::kChildren);
}

// Every Python frame evaluation in the interpreter comes here. The sonde frame opened before is
// closed after, on the same C stack, whatever way the frame left: return, yield, or an exception
// (a NULL result). Frames that were running when the hook was installed never come here, so
// they are never closed either.
PyObject* evaluate(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag);

// Deep in the C stack: this frame and everything it calls run without the hook, so the
// interpreter inlines their Python calls again. They are not recorded (their time goes to the
// recorded frame above them), nor are other threads' calls made meanwhile; the hook comes back
// when this frame returns.
PyObject* evaluate_unhooked(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  PyInterpreterState* interp = tstate->interp;
  _PyInterpreterState_SetEvalFrameFunc(interp, g_beneath);
  g_suspended = true;
  PyObject* result = g_beneath(tstate, frame, throwflag);
  g_suspended = false;
  if (g_in_chain && _PyInterpreterState_GetEvalFrameFunc(interp) == g_beneath) {
    _PyInterpreterState_SetEvalFrameFunc(interp, evaluate);
  }
  return result;
}

PyObject* evaluate(PyThreadState* tstate, _PyInterpreterFrame* frame, int throwflag) {
  ThreadHook& hook = thread_hook();
  if (hook.stack_floor == 0) hook.stack_floor = stack_floor();
  if (reinterpret_cast<uintptr_t>(__builtin_frame_address(0)) < hook.stack_floor) {
    return evaluate_unhooked(tstate, frame, throwflag);
  }
  bool in_machinery = hook.in_machinery;
  ThreadState* t = open_frame(hook, frame, throwflag);
  PyObject* result = g_beneath(tstate, frame, throwflag);
  if (t != nullptr) {
    // Refused at the recursion check (a RecursionError), the frame never ran: no call.
    if (__builtin_expect(result == nullptr, 0) && frame->prev_instr < _PyCode_CODE(frame->f_code))
      probe_cancel(t);
    else
      probe_exit(t, nullptr, nullptr);
  }
  if (__builtin_expect(hook.subnormal_frame == frame, 0))
    hook.subnormal_frame = settle_subnormal_arguments(frame);
  // The outermost frame of an import has returned.
  if (__builtin_expect(hook.in_machinery && !in_machinery, 0) && !greenlets_followed()) {
    greenlets_import_ended();
  }
  hook.in_machinery = in_machinery;
  // A class or module body has returned: its namespace holds the functions it defined. The
  // frame is cleared by the caller, after this.
  if (g_guard_getitem && result != nullptr && (frame->f_code->co_flags & CO_OPTIMIZED) == 0) {
    guard_namespace(frame->f_locals);
  }
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
  if (Py_Version < 0x030B0400 && !g_guard_getitem) {
    g_guard_getitem = true;
    guard_existing_classes();
  }
  g_recording = true;
  return true;
}

void eval_frame_skip_calls(int n) { thread_hook().skip = n; }

bool& eval_frame_in_machinery() { return thread_hook().in_machinery; }

void uninstall_eval_frame() {
  g_recording = false;
  PyInterpreterState* interp = interpreter();
  if (g_in_chain && _PyInterpreterState_GetEvalFrameFunc(interp) == evaluate) {
    _PyInterpreterState_SetEvalFrameFunc(interp, g_beneath);
    g_in_chain = false;
  } else if (g_suspended) {
    g_in_chain = false;  // out already: it stays out when the deep frame returns
  }
}

#else  // not CPython 3.11

bool eval_frame_available() { return false; }

bool install_eval_frame() {
  PyErr_SetString(PyExc_RuntimeError,
                  "sonde's frame-evaluation hook is written for CPython 3.11 only");
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
