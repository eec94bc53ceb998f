#include "monitoring.hpp"

#include <structmember.h>

#include <cstdio>
#include <vector>

#include "code_table.hpp"
#include "frames.hpp"
#include "out_of_memory.hpp"
#include "per_thread.hpp"
#include "sonde/probe.hpp"
#include "subnormals.hpp"

namespace sonde::python {

#if PY_VERSION_HEX >= 0x030C0000

namespace {

// Not PROFILER_ID (2): cProfile and profile take that one on 3.12+, so a program that profiles
// itself would fail (ValueError) under sonde. 4 has no conventional owner.
constexpr int kToolId = 4;

// One entry per frame or C call that a start or CALL event pushed on this thread. The key (the
// code object, or the C callable) lets a return find its own entry: frames running when the
// hook was installed return without having been entered, and must not close another's.
struct Open {
  const void* key;
  ThreadState* thread;  // nullptr: not recorded (skipped, folded, or refused by the depth limit)
  bool c_call;
  bool machinery;  // a frame of the import machinery: those it calls open nothing
  const void* subnormal_key = nullptr;  // its subnormal check waits for its end (subnormals.hpp)
};
// One thread-local object, so that a callback looks its thread up once.
struct ThreadFrames {
  std::vector<Open> open;
  int skip = 0;
  bool seen = false;  // a start event came on this thread (trace_lines_on_this_thread asked)
};
ThreadFrames& thread_frames() { return PerThread<ThreadFrames>::get(); }

// How far below the top a leaving frame's entry is looked for: an entry above it lost its
// return event (none is known to, but a lost one then costs one frame, not the whole stack).
constexpr size_t kSearch = 8;

bool g_installed = false;

void push(const void* key, bool c_call, RoutineId id, bool resumed, bool machinery = false) {
  ThreadFrames& f = thread_frames();
  // Grown before anything is entered: a std::bad_alloc from push_back after probe_enter would
  // leave a sonde frame open with no entry to close it.
  if (f.open.size() == f.open.capacity()) f.open.reserve(f.open.empty() ? 64 : 2 * f.open.size());
  if (f.skip > 0) {
    --f.skip;
    f.open.push_back({key, nullptr, c_call, false});
    return;
  }
  if (folded_into_import(!f.open.empty() && f.open.back().machinery, machinery)) {
    f.open.push_back({key, nullptr, c_call, true});  // within the import its outermost frame opened
    return;
  }
  ThreadState* t =
      resumed ? probe_resume(id, Nesting::kChildren) : probe_enter(id, Nesting::kChildren);
  f.open.push_back({key, t, c_call, machinery});
}

RoutineId push_code(PyCodeObject* code, bool resumed, bool* machinery = nullptr) {
  ThreadFrames& f = thread_frames();
  if (!f.open.empty() && f.open.back().machinery && f.skip == 0 && fold_imports()) {
    f.open.push_back({code, nullptr, false, true});  // inside an import folded whole: not looked up
    if (machinery != nullptr) *machinery = false;
    return 0;
  }
  bool folded = false;
  RoutineId id = code_routine(code, &folded);
  push(code, false, id, resumed, folded);
  if (machinery != nullptr) *machinery = folded;
  return id;
}

void pop_to(std::vector<Open>& open, size_t size) {
  while (open.size() > size) {
    if (open.back().thread != nullptr) probe_exit_frame(open.back().thread);
    if (open.back().subnormal_key != nullptr) settle_subnormal_arguments(open.back().subnormal_key);
    open.pop_back();
  }
}

// A Python frame leaves: return, yield, or an exception.
void leave_frame(const void* code) {
  std::vector<Open>& open = thread_frames().open;
  size_t n = open.size();
  for (size_t i = n; i > 0 && n - i < kSearch; --i) {
    if (open[i - 1].key == code && !open[i - 1].c_call) {
      pop_to(open, i - 1);
      return;
    }
  }
}

PyCodeObject* code_arg(PyObject* const* args, Py_ssize_t nargs) {
  return nargs >= 1 && PyCode_Check(args[0]) ? reinterpret_cast<PyCodeObject*>(args[0]) : nullptr;
}

// The callbacks: METH_FASTCALL functions that sys.monitoring calls with (code, offset, ...).
// A generator or coroutine is one call: PY_START is its first entry, PY_RESUME and PY_THROW
// (throw(), close()) re-enter it.
PyObject* on_start(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (ThreadFrames& f = thread_frames(); !f.seen) {
    f.seen = true;
    trace_lines_on_this_thread(true);
  }
  if (PyCodeObject* code = code_arg(args, nargs)) {
    bool machinery = false;
    RoutineId id = push_code(code, false, &machinery);
    bool recorded = thread_frames().open.back().thread != nullptr;
    if (recorded && !machinery && subnormal_sample_due())
      thread_frames().open.back().subnormal_key =
          check_subnormal_arguments_of_current_frame(id, code);
  }
  Py_RETURN_NONE;
}

PyObject* on_resume(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (PyCodeObject* code = code_arg(args, nargs)) push_code(code, true);
  Py_RETURN_NONE;
}

// PY_RETURN, PY_YIELD, PY_UNWIND.
PyObject* on_leave(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (PyCodeObject* code = code_arg(args, nargs)) leave_frame(code);
  Py_RETURN_NONE;
}

PyObject* g_missing = nullptr;  // sys.monitoring.MISSING: a call without arguments
PyObject* g_disable = nullptr;  // sys.monitoring.DISABLE

// CALL: (code, offset, callable, arg0). Python functions are left to PY_START: most calls of
// a call-heavy program are theirs, so the callable's type is asked first, with nothing looked up.
PyObject* on_call(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 4 || !is_c_callable(args[2], args[3] == g_missing ? nullptr : args[3]))
    Py_RETURN_NONE;
  // Inside an import folded whole nothing is recorded, nor its call sites looked up (which
  // would register every function an import runs); their C_RETURN finds no entry of theirs.
  ThreadFrames& f = thread_frames();
  if (!f.open.empty() && f.open.back().machinery && f.skip == 0 && fold_imports()) Py_RETURN_NONE;
  bool machinery = false;
  if (PyCode_Check(args[0])) {
    code_routine(reinterpret_cast<PyCodeObject*>(args[0]), &machinery);
    // A call site in the import machinery's code never records its C call (folded), whoever
    // ran it: the site is switched off for good, with its C_RETURN and C_RAISE. Python
    // functions it calls still have their PY_START.
    if (machinery) return Py_NewRef(g_disable);
  }
  RoutineId id;
  if (c_callable_routine(args[2], args[3] == g_missing ? nullptr : args[3], &id)) {
    push(args[2], true, id, false);
  }
  Py_RETURN_NONE;
}

// C_RETURN, C_RAISE: the same arguments as the CALL they close.
PyObject* on_c_leave(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  std::vector<Open>& open = thread_frames().open;
  if (nargs >= 3 && !open.empty() && open.back().c_call && open.back().key == args[2]) {
    pop_to(open, open.size() - 1);
  }
  Py_RETURN_NONE;
}

using Callback = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t);

// The callbacks are objects of a small type of their own that sys.monitoring calls through
// vectorcall straight into the function: a builtin function object would add its own call
// layer (argument-convention dispatch and a recursion check) to every event.
struct CallbackObject {
  PyObject_HEAD vectorcallfunc vectorcall;
};

template <Callback F>
PyObject* vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject*) {
  // Never an exception into CPython's C frames (out_of_memory.hpp); the callbacks return None
  // or DISABLE, never NULL.
  PyObject* r =
      or_starve<PyObject*>(nullptr, [&] { return F(self, args, PyVectorcall_NARGS(nargsf)); });
  return r != nullptr ? r : Py_NewRef(Py_None);
}

PyMemberDef g_callback_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(CallbackObject, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};
PyType_Slot g_callback_slots[] = {{Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
                                  {Py_tp_members, g_callback_members},
                                  {0, nullptr}};
PyType_Spec g_callback_spec = {"sonde._sonde.MonitoringCallback", sizeof(CallbackObject), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, g_callback_slots};
PyObject* g_callback_type = nullptr;  // kept for the process's life

PyObject* new_callback(vectorcallfunc f) {
  if (g_callback_type == nullptr) g_callback_type = PyType_FromSpec(&g_callback_spec);
  if (g_callback_type == nullptr) return nullptr;
  auto* o = PyObject_New(CallbackObject, reinterpret_cast<PyTypeObject*>(g_callback_type));
  if (o != nullptr) o->vectorcall = f;
  return reinterpret_cast<PyObject*>(o);
}

struct EventHook {
  const char* event;  // name in sys.monitoring.events
  bool builtins;      // only with builtins
  vectorcallfunc callback;
};

EventHook g_hooks[] = {
    {"PY_START", false, vectorcall<on_start>},  {"PY_RESUME", false, vectorcall<on_resume>},
    {"PY_THROW", false, vectorcall<on_resume>}, {"PY_RETURN", false, vectorcall<on_leave>},
    {"PY_YIELD", false, vectorcall<on_leave>},  {"PY_UNWIND", false, vectorcall<on_leave>},
    {"CALL", true, vectorcall<on_call>},        {"C_RETURN", true, vectorcall<on_c_leave>},
    {"C_RAISE", true, vectorcall<on_c_leave>},
};

PyObject* monitoring_module() {
  PyObject* sys = PyImport_ImportModule("sys");
  if (sys == nullptr) return nullptr;
  PyObject* m = PyObject_GetAttrString(sys, "monitoring");
  Py_DECREF(sys);
  return m;
}

// The result of a sys.monitoring call, dropped: false when it raised.
bool call_ok(PyObject* result) {
  Py_XDECREF(result);
  return result != nullptr;
}

// The event's bit, or -1 with an exception set.
long event_bit(PyObject* mon, const char* event) {
  PyObject* events = PyObject_GetAttrString(mon, "events");
  if (events == nullptr) return -1;
  PyObject* bit = PyObject_GetAttrString(events, event);
  Py_DECREF(events);
  if (bit == nullptr) return -1;
  long v = PyLong_AsLong(bit);
  Py_DECREF(bit);
  return v;
}

// Another tool holds the id: says which, in one line, and leaves no exception.
void report_taken(PyObject* mon) {
  PyErr_Clear();
  PyObject* holder = PyObject_CallMethod(mon, "get_tool", "i", kToolId);
  const char* name = holder != nullptr && PyUnicode_Check(holder) ? PyUnicode_AsUTF8(holder) : "";
  if (name == nullptr) name = "";
  PySys_WriteStderr(
      "sonde: sys.monitoring tool id %d is held by %s%s%s; recording Python "
      "frames through the profile function instead\n",
      kToolId, *name ? "'" : "another tool", name, *name ? "'" : "");
  Py_XDECREF(holder);
  PyErr_Clear();
}

bool register_all(PyObject* mon, bool builtins) {
  long mask = 0;
  for (EventHook& h : g_hooks) {
    if (h.builtins && !builtins) continue;
    long bit = event_bit(mon, h.event);
    if (bit < 0) return false;
    PyObject* f = new_callback(h.callback);
    if (f == nullptr) return false;
    bool ok = call_ok(PyObject_CallMethod(mon, "register_callback", "ilO", kToolId, bit, f));
    Py_DECREF(f);
    if (!ok) return false;
    mask |= bit;
  }
  return call_ok(PyObject_CallMethod(mon, "set_events", "il", kToolId, mask));
}

}  // namespace

bool monitoring_available() { return true; }

bool install_monitoring(bool builtins) {
  if (!code_table_init()) return false;
  PyObject* mon = monitoring_module();
  if (mon == nullptr) return false;
  if (g_missing == nullptr) g_missing = PyObject_GetAttrString(mon, "MISSING");  // kept
  if (g_disable == nullptr) g_disable = PyObject_GetAttrString(mon, "DISABLE");  // kept
  if (g_missing == nullptr || g_disable == nullptr ||
      !call_ok(PyObject_CallMethod(mon, "use_tool_id", "is", kToolId, "sonde"))) {
    bool taken = g_missing != nullptr && PyErr_ExceptionMatches(PyExc_ValueError);
    if (taken) report_taken(mon);
    Py_DECREF(mon);
    return false;
  }
  g_installed = true;
  bool ok = register_all(mon, builtins);
  Py_DECREF(mon);
  if (!ok) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    uninstall_monitoring();
    PyErr_Restore(type, value, tb);
  }
  return ok;
}

void monitoring_skip_calls(int n) { thread_frames().skip = n; }

void uninstall_monitoring() {
  if (!g_installed) return;
  g_installed = false;
  PyObject* mon = monitoring_module();
  if (mon == nullptr) {
    PyErr_Clear();
    return;
  }
  // The program may have freed sonde's tool id (a cleanup loop over every id) and taken it:
  // the frames after that were not recorded, which went unsaid (a red-team find), and the id
  // is no longer sonde's to free.
  PyObject* holder = PyObject_CallMethod(mon, "get_tool", "i", kToolId);
  bool ours = holder != nullptr && PyUnicode_Check(holder) &&
              PyUnicode_CompareWithASCIIString(holder, "sonde") == 0;
  Py_XDECREF(holder);
  PyErr_Clear();
  if (!ours) {
    sonde::add_run_note("python",
                        "the program freed sys.monitoring's tool id 4, which sonde holds: "
                        "Python frames run after that were not recorded (native calls were)");
    Py_DECREF(mon);
    return;
  }
  // Still sonde's, its events switched off by the program (set_events(4, 0)): the same loss.
  PyObject* events = PyObject_CallMethod(mon, "get_events", "i", kToolId);
  if (events != nullptr && PyLong_Check(events) && PyLong_AsLong(events) == 0)
    sonde::add_run_note("python",
                        "the program switched off the sys.monitoring events of tool id 4, which "
                        "sonde holds: Python frames run after that were not recorded (native "
                        "calls were)");
  Py_XDECREF(events);
  PyErr_Clear();
  call_ok(PyObject_CallMethod(mon, "set_events", "ii", kToolId, 0));
  PyErr_Clear();
  for (EventHook& h : g_hooks) {
    long bit = event_bit(mon, h.event);
    if (bit >= 0)
      call_ok(PyObject_CallMethod(mon, "register_callback", "ilO", kToolId, bit, Py_None));
    PyErr_Clear();
  }
  call_ok(PyObject_CallMethod(mon, "free_tool_id", "i", kToolId));
  PyErr_Clear();
  Py_DECREF(mon);
}

#else  // before CPython 3.12

bool monitoring_available() { return false; }

bool install_monitoring(bool) {
  PyErr_SetString(PyExc_RuntimeError, "sys.monitoring needs CPython 3.12 or later");
  return false;
}

void monitoring_skip_calls(int) {}

void uninstall_monitoring() {}

#endif

}  // namespace sonde::python
