/* The floor of a C profile hook in CPython: a profile function that does nothing.
 *
 * start() installs it with PyEval_SetProfile, as cProfile, yappi and sonde install theirs, so a
 * program run under it pays CPython's own profiling machinery (the tracing dispatch of every
 * instruction, a frame object per call, the call into the hook at every call and return) and
 * nothing else. tests/bench/py_profiler_run.py runs a script under it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static int noop(PyObject* obj, PyFrameObject* frame, int what, PyObject* arg) {
  (void)obj;
  (void)frame;
  (void)what;
  (void)arg;
  return 0;
}

static PyObject* start(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  PyEval_SetProfile(noop, NULL);
  Py_RETURN_NONE;
}

static PyObject* stop(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  PyEval_SetProfile(NULL, NULL);
  Py_RETURN_NONE;
}

/* The same floor for sys.monitoring (3.12+): a C callback that returns at once, registered for
 * the events sonde's default hook takes (py_profiler_run.py noop-monitoring). */
static PyObject* event(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
  (void)self;
  (void)args;
  (void)nargs;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"start", start, METH_NOARGS, "Install the no-op profile function in this thread."},
    {"stop", stop, METH_NOARGS, "Remove it."},
    {"event", (PyCFunction)(void (*)(void))event, METH_FASTCALL,
     "A sys.monitoring callback that does nothing."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_noop_profiler", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__noop_profiler(void) { return PyModule_Create(&module); }
