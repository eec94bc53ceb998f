// sonde._sonde: the C extension behind `python3 -m sonde`. It needs libsonde.so loaded in the
// global scope (preloaded), where the probe API and the BLAS interposition live.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string>

#include "eval_frame.hpp"
#include "code_table.hpp"
#include "frames.hpp"
#include "monitoring.hpp"
#include "regions.hpp"
#include "sonde/probe.hpp"
#include "sonde/sonde.h"

namespace {

// Which hook records the frames. By default the cheapest this build has: the frame-evaluation
// hook on 3.11, sys.monitoring on 3.12+ (Python frames only). With builtins (C functions too):
// sys.monitoring on 3.12+, else CPython's profile function, which is also the fallback when
// another tool holds sonde's sys.monitoring tool id.
enum class Hook { kNone, kEvalFrame, kMonitoring, kProfile };
Hook g_hook = Hook::kNone;

const char* hook_name(Hook h) {
  switch (h) {
    case Hook::kEvalFrame:
      return "eval_frame";
    case Hook::kMonitoring:
      return "monitoring";
    default:
      return "profile";
  }
}

void stop_hooks() {
  switch (g_hook) {
    case Hook::kProfile:
      sonde::python::uninstall_all_threads();  // the line tracing too
      break;
    case Hook::kEvalFrame:
      sonde::python::uninstall_eval_frame();
      sonde::python::uninstall_line_tracing();
      break;
    case Hook::kMonitoring:
      sonde::python::uninstall_monitoring();
      sonde::python::uninstall_line_tracing();
      break;
    case Hook::kNone:
      break;
  }
  g_hook = Hook::kNone;
}

// Installs the hook for `builtins`; kNone with a Python exception set on failure.
Hook install(bool builtins) {
  using namespace sonde::python;
  if (!builtins && eval_frame_available())
    return install_eval_frame() ? Hook::kEvalFrame : Hook::kNone;
  if (monitoring_available()) {
    if (install_monitoring(builtins)) return Hook::kMonitoring;
    if (PyErr_Occurred()) return Hook::kNone;  // else another tool has the id: fall back
  }
  return install_all_threads(builtins) ? Hook::kProfile : Hook::kNone;
}

PyObject* start(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"skip_calls", "lines", "builtins", "skip_exec", "imports",
                                    nullptr};
  int skip_calls = 0;
  PyObject* lines = nullptr;
  int builtins = 0;
  int skip_exec = 0;
  int imports = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$iOppp", const_cast<char**>(kKeywords),
                                   &skip_calls, &lines, &builtins, &skip_exec, &imports)) {
    return nullptr;
  }
  std::vector<std::string> patterns;
  if (lines != nullptr && lines != Py_None) {
    PyObject* seq = PySequence_Fast(lines, "lines must be a sequence of patterns");
    if (seq == nullptr) return nullptr;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq); ++i) {
      const char* p = PyUnicode_AsUTF8(PySequence_Fast_GET_ITEM(seq, i));
      if (p == nullptr) {
        Py_DECREF(seq);
        return nullptr;
      }
      patterns.emplace_back(p);
    }
    Py_DECREF(seq);
  }
  if (!sonde_active()) {
    PyErr_SetString(PyExc_RuntimeError,
                    "libsonde is not recording in this process (run through `python3 -m sonde` "
                    "or with LD_PRELOAD=libsonde.so)");
    return nullptr;
  }
  // Sub-interpreters (their site imports sonde's sitecustomize too) are not recorded: the hooks
  // and sonde's per-code table belong to the main interpreter.
  if (PyInterpreterState_Get() != PyInterpreterState_Main()) Py_RETURN_NONE;
  if (!sonde::python::code_table_init()) return nullptr;
  stop_hooks();  // a second start() may choose another hook
  sonde::python::set_fold_imports(!imports);
  g_hook = install(builtins);
  if (g_hook == Hook::kNone) return nullptr;
  // The launcher's exec (a C function) comes next: only hooks that see C functions see it.
  bool sees_c_calls = builtins && (g_hook == Hook::kProfile || g_hook == Hook::kMonitoring);
  int skip = skip_calls + (skip_exec && sees_c_calls ? 1 : 0);
  switch (g_hook) {
    case Hook::kEvalFrame:
      sonde::python::eval_frame_skip_calls(skip);
      break;
    case Hook::kMonitoring:
      sonde::python::monitoring_skip_calls(skip);
      break;
    default:
      sonde::python::skip_calls(skip);
      break;
  }
  if (!sonde::python::install_line_tracing(patterns)) return nullptr;
  return PyUnicode_FromString(hook_name(g_hook));
}

PyObject* stop(PyObject*, PyObject*) {
  stop_hooks();
  Py_RETURN_NONE;
}

// torch's intra-op thread count, when the program has imported torch (sonde never imports
// it): the count its oneDNN and ATen kernels run with where the library itself cannot say
// (docs/metrics.md). Read with the GIL held, at each flush the Python side asks for (the
// launchers' atexit flush among them), so the count the program ended with is recorded.
void record_torch_threads() {
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  PyObject* torch = modules ? PyMapping_GetItemString(modules, "torch") : nullptr;
  if (torch == nullptr || torch == Py_None) {
    Py_XDECREF(torch);
    PyErr_Clear();
    return;
  }
  // A torch still being imported has no get_num_threads yet: nothing to record.
  PyObject* count = PyObject_CallMethod(torch, "get_num_threads", nullptr);
  Py_DECREF(torch);
  long n = count != nullptr && PyLong_Check(count) ? PyLong_AsLong(count) : -1;
  Py_XDECREF(count);
  PyErr_Clear();
  if (n > 0 && n <= 65535) sonde::set_run_fact("torch.num_threads", std::to_string(n).c_str());
}

PyObject* flush(PyObject*, PyObject*) {
  record_torch_threads();
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = sonde_flush();
  Py_END_ALLOW_THREADS return PyBool_FromLong(rc == 0);
}

PyObject* active(PyObject*, PyObject*) { return PyBool_FromLong(sonde_active()); }

PyMethodDef kMethods[] = {
    {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(start)),
     METH_VARARGS | METH_KEYWORDS,
     "start(*, skip_calls=0, lines=(), builtins=False, skip_exec=False, imports=False): record\n"
     "Python frames of every thread into sonde's stacks. builtins=False: Python frames only, through the\n"
     "frame-evaluation hook where EVAL_FRAME is True, sys.monitoring where MONITORING is True,\n"
     "else as builtins=True; builtins=True: C functions too, through sys.monitoring where\n"
     "MONITORING is True, else CPython's profile function. The next skip_calls calls on this\n"
     "thread that the chosen hook sees (the launcher's own) are not recorded, plus one with\n"
     "skip_exec where the hook sees C functions (the launcher's exec); functions matching a\n"
     "pattern in lines (fnmatch) get per-line times. imports=False: each import is one <import>\n"
     "frame, what it runs folded into it; True: module bodies recorded beneath it. Returns the\n"
     "hook used: 'eval_frame',\n"
     "'monitoring' or 'profile'; None in a sub-interpreter, which is not recorded."},
    {"stop", stop, METH_NOARGS, "Stop recording Python frames."},
    {"flush", flush, METH_NOARGS,
     "Write what was measured so far to the profile; True on success."},
    {"active", active, METH_NOARGS, "True when libsonde is loaded and recording."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_sonde",
                       "sonde's CPython hook (see the sonde package).",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__sonde() {
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  // True where start() records through the frame-evaluation hook (3.11) or sys.monitoring
  // (3.12+) by default.
  if (PyModule_AddObject(m, "EVAL_FRAME", PyBool_FromLong(sonde::python::eval_frame_available())) <
          0 ||
      PyModule_AddObject(m, "MONITORING", PyBool_FromLong(sonde::python::monitoring_available())) <
          0 ||
      !sonde::python::add_region_types(m)) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
