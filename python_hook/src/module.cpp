// sonde._sonde: the C extension behind `python3 -m sonde`. It needs libsonde.so loaded in the
// global scope (preloaded), where the probe API and the BLAS interposition live.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "frames.hpp"
#include "sonde/sonde.h"

namespace {

PyObject* start(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"skip_calls", "lines", nullptr};
  int skip_calls = 0;
  PyObject* lines = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$iO", const_cast<char**>(kKeywords),
                                   &skip_calls, &lines)) {
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
  if (!sonde::python::install_all_threads()) return nullptr;
  if (!sonde::python::install_line_tracing(patterns)) return nullptr;
  sonde::python::skip_calls(skip_calls);
  Py_RETURN_NONE;
}

PyObject* stop(PyObject*, PyObject*) {
  sonde::python::uninstall_all_threads();
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
     "start(*, skip_calls=0, lines=()): record Python frames of every thread into sonde's\n"
     "stacks; the next skip_calls calls on this thread (the launcher's own) are not recorded;\n"
     "functions matching a pattern in lines (fnmatch) get per-line times."},
    {"stop", stop, METH_NOARGS, "Stop recording Python frames."},
    {"flush", flush, METH_NOARGS, "Write what was measured so far to the profile; True on success."},
    {"active", active, METH_NOARGS, "True when libsonde is loaded and recording."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_sonde",
                       "sonde's CPython hook (see the sonde package).", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__sonde() { return PyModule_Create(&kModule); }
