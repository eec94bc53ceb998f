// sonde._sonde: the C extension behind `python3 -m sonde`. It needs libsonde.so loaded in the
// global scope (preloaded), where the probe API and the BLAS interposition live.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "eval_frame.hpp"
#include "frames.hpp"
#include "sonde/sonde.h"

namespace {

// Which hook records the frames: the frame-evaluation hook where this build has it (Python
// frames only, and cheap), else CPython's profile function (C functions too).
bool g_profile_hook = false;
bool g_started = false;

void stop_hooks() {
  if (!g_started) return;
  if (g_profile_hook) {
    sonde::python::uninstall_all_threads();
  } else {
    sonde::python::uninstall_eval_frame();
    sonde::python::uninstall_line_tracing();
  }
  g_started = false;
}

PyObject* start(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"skip_calls", "lines", "builtins", nullptr};
  int skip_calls = 0;
  PyObject* lines = nullptr;
  int builtins = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$iOp", const_cast<char**>(kKeywords),
                                   &skip_calls, &lines, &builtins)) {
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
  if (!sonde::python::reserve_code_extra()) return nullptr;
  stop_hooks();  // a second start() may choose the other hook
  g_started = true;
  g_profile_hook = builtins || !sonde::python::eval_frame_available();
  if (g_profile_hook) {
    if (!sonde::python::install_all_threads()) return nullptr;
    sonde::python::skip_calls(skip_calls);
  } else {
    if (!sonde::python::install_eval_frame()) return nullptr;
    sonde::python::eval_frame_skip_calls(skip_calls);
  }
  if (!sonde::python::install_line_tracing(patterns)) return nullptr;
  return PyUnicode_FromString(g_profile_hook ? "profile" : "eval_frame");
}

PyObject* stop(PyObject*, PyObject*) {
  stop_hooks();
  Py_RETURN_NONE;
}

PyObject* flush(PyObject*, PyObject*) {
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = sonde_flush();
  Py_END_ALLOW_THREADS return PyBool_FromLong(rc == 0);
}

PyObject* active(PyObject*, PyObject*) { return PyBool_FromLong(sonde_active()); }

PyMethodDef kMethods[] = {
    {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(start)),
     METH_VARARGS | METH_KEYWORDS,
     "start(*, skip_calls=0, lines=(), builtins=False): record Python frames of every thread\n"
     "into sonde's stacks. builtins=False: Python frames only, through the frame-evaluation\n"
     "hook where EVAL_FRAME is True (else as builtins=True); builtins=True: C functions too,\n"
     "through CPython's profile function. The next skip_calls calls on this thread that the\n"
     "chosen hook sees (the launcher's own) are not recorded; functions matching a pattern in\n"
     "lines (fnmatch) get per-line times. Returns the hook used: 'eval_frame' or 'profile'."},
    {"stop", stop, METH_NOARGS, "Stop recording Python frames."},
    {"flush", flush, METH_NOARGS, "Write what was measured so far to the profile; True on success."},
    {"active", active, METH_NOARGS, "True when libsonde is loaded and recording."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_sonde",
                       "sonde's CPython hook (see the sonde package).", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__sonde() {
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  // True where start() records through the frame-evaluation hook by default.
  PyObject* eval_frame = PyBool_FromLong(sonde::python::eval_frame_available());
  if (PyModule_AddObject(m, "EVAL_FRAME", eval_frame) < 0) {
    Py_DECREF(eval_frame);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
