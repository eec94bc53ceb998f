#include "fork_guard.hpp"

#include "sonde/probe.hpp"

namespace sonde::python {

#if PY_VERSION_HEX >= 0x030C0000

namespace {

PyObject* g_fork = nullptr;     // the real posix.fork
PyObject* g_forkpty = nullptr;  // the real posix.forkpty, where the platform has one

// Called with the GIL: the wait for the flusher, which never takes the GIL, is bounded (as
// long as a flush under way may wait for the file), and the GIL is let go meanwhile so that
// the program's other threads run. Threads forking at once share one pause (the runtime
// counts them); each call here is paired with its resume.
PyObject* without_flusher(PyObject* real) {
  bool paused;
  Py_BEGIN_ALLOW_THREADS;
  paused = fork_pauses_flusher();
  Py_END_ALLOW_THREADS;
  PyObject* result = PyObject_CallNoArgs(real);
  if (paused) fork_resumes_flusher();  // in the child a no-op: its own flusher runs already
  return result;
}

PyObject* fork(PyObject*, PyObject*) { return without_flusher(g_fork); }
PyObject* forkpty(PyObject*, PyObject*) { return without_flusher(g_forkpty); }

PyMethodDef kFork = {"fork", fork, METH_NOARGS,
                     "Fork a child process.\n\nReturn 0 to child process and PID of child to "
                     "parent process."};
PyMethodDef kForkpty = {"forkpty", forkpty, METH_NOARGS,
                        "Fork a new process with a new pseudo-terminal as controlling tty.\n\n"
                        "Returns a tuple of (pid, master_fd)."};

// `name` of posix, and of os where it is the same object, replaced by `def`'s wrapper.
bool wrap(const char* name, PyMethodDef* def, PyObject** real) {
  PyObject* posix = PyImport_ImportModule("posix");
  if (posix == nullptr) return false;
  PyObject* original = PyObject_GetAttrString(posix, name);
  if (original == nullptr) {  // not on this platform
    PyErr_Clear();
    Py_DECREF(posix);
    return true;
  }
  PyObject* module_name = PyUnicode_FromString("posix");
  PyObject* wrapper = module_name ? PyCFunction_NewEx(def, nullptr, module_name) : nullptr;
  Py_XDECREF(module_name);
  bool ok = wrapper != nullptr;
  if (ok) {
    *real = original;  // kept for the process's life
    PyObject* os = PyImport_ImportModule("os");
    if (os != nullptr) {
      PyObject* in_os = PyObject_GetAttrString(os, name);
      if (in_os == original) ok = PyObject_SetAttrString(os, name, wrapper) == 0;
      if (in_os == nullptr) PyErr_Clear();
      Py_XDECREF(in_os);
      Py_DECREF(os);
    } else {
      ok = false;
    }
    ok = ok && PyObject_SetAttrString(posix, name, wrapper) == 0;
  } else {
    Py_DECREF(original);
  }
  Py_XDECREF(wrapper);
  Py_DECREF(posix);
  return ok;
}

}  // namespace

bool guard_fork() {
  static bool done = false;
  if (done) return true;
  done = true;
  return wrap("fork", &kFork, &g_fork) && wrap("forkpty", &kForkpty, &g_forkpty);
}

#else

bool guard_fork() { return true; }

#endif

}  // namespace sonde::python
