#include "setup_calls.hpp"

#include <structmember.h>

#include <cstddef>
#include <cstring>

// libsonde's (wrappers/torch/torch_attach.cpp): the set-up frame and its comm op.
extern "C" {
void sonde_torch_setup_begin(const char* name);
void sonde_torch_wait_begin(const char* name);
void sonde_torch_setup_end(void);
void sonde_torch_work_waited(void);
}

namespace sonde::python {

namespace {

struct SetupCall {
  PyObject_HEAD PyObject* name;  // bytes: its buffer is what libsonde is given
  PyObject* function;            // the wrapped one
  PyObject* after;               // None, or a callable run before the frame closes
  PyObject* dict;                // functools.update_wrapper's __wrapped__, __name__, __doc__, ...
  int wait;                      // a Work.wait: a `wait` frame, not a set-up one
};

// torch.distributed's own blocking calls (distributed_c10d.py's all_reduce, barrier, ...) wait on
// their work inside their frames, which are communication already (the view c10d_waits): a wait
// they call is left to them.
bool called_by_c10d() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame == nullptr) return false;
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  bool c10d = false;
  if (PyUnicode_Check(code->co_filename)) {
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    if (file == nullptr)
      PyErr_Clear();
    else
      c10d = std::strstr(file, "torch/distributed/distributed_c10d.py") != nullptr;
  }
  Py_DECREF(code);
  return c10d;
}

PyObject* setup_call_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* s = reinterpret_cast<SetupCall*>(self);
  if (s->wait && called_by_c10d()) {
    PyObject* result = PyObject_Call(s->function, args, kwargs);
    sonde_torch_work_waited();
    return result;
  }
  if (s->wait)
    sonde_torch_wait_begin(PyBytes_AS_STRING(s->name));
  else
    sonde_torch_setup_begin(PyBytes_AS_STRING(s->name));
  PyObject* result = PyObject_Call(s->function, args, kwargs);
  if (result != nullptr && s->after != Py_None) {
    // sonde's own bookkeeping: its failure is never the program's.
    PyObject* ignored = PyObject_CallNoArgs(s->after);
    if (ignored == nullptr) PyErr_Clear();
    Py_XDECREF(ignored);
  }
  sonde_torch_setup_end();
  return result;
}

int setup_call_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* s = reinterpret_cast<SetupCall*>(self);
  Py_VISIT(Py_TYPE(self));
  Py_VISIT(s->name);
  Py_VISIT(s->function);
  Py_VISIT(s->after);
  Py_VISIT(s->dict);
  return 0;
}

int setup_call_clear(PyObject* self) {
  auto* s = reinterpret_cast<SetupCall*>(self);
  Py_CLEAR(s->name);
  Py_CLEAR(s->function);
  Py_CLEAR(s->after);
  Py_CLEAR(s->dict);
  return 0;
}

void setup_call_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  setup_call_clear(self);
  type->tp_free(self);
  Py_DECREF(type);  // a heap type's instances hold it
}

// A call through a bound one: `pair` is (the SetupCall, the object it is bound to).
PyObject* bound_call(PyObject* pair, PyObject* args, PyObject* kwargs) {
  PyObject* call = PyTuple_GET_ITEM(pair, 0);
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyObject* all = PyTuple_New(n + 1);
  if (all == nullptr) return nullptr;
  PyObject* obj = PyTuple_GET_ITEM(pair, 1);
  Py_INCREF(obj);
  PyTuple_SET_ITEM(all, 0, obj);
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* a = PyTuple_GET_ITEM(args, i);
    Py_INCREF(a);
    PyTuple_SET_ITEM(all, i + 1, a);
  }
  PyObject* result = setup_call_call(call, all, kwargs);
  Py_DECREF(all);
  return result;
}

PyMethodDef kBoundCall = {"wait",
                          reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(bound_call)),
                          METH_VARARGS | METH_KEYWORDS, nullptr};

// Bound as a method is, so that a method (Work.wait) stays one on the class; as a built-in
// method, not a Python one: pybind11's trampolines take a Python-level attribute of a class
// they bind for a Python override, and a Python subclass of Work that does not override wait
// (a backend of the program's own) called the wrapper from C++'s Work::wait, which called
// Work::wait again, until RecursionError. A built-in one is no override to them.
PyObject* setup_call_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  PyObject* pair = PyTuple_Pack(2, self, obj);
  if (pair == nullptr) return nullptr;
  PyObject* bound = PyCFunction_NewEx(&kBoundCall, pair, nullptr);
  Py_DECREF(pair);
  return bound;
}

PyGetSetDef kGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef kMembers[] = {
    {"__dictoffset__", T_PYSSIZET, offsetof(SetupCall, dict), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot kSlots[] = {{Py_tp_call, reinterpret_cast<void*>(setup_call_call)},
                        {Py_tp_traverse, reinterpret_cast<void*>(setup_call_traverse)},
                        {Py_tp_clear, reinterpret_cast<void*>(setup_call_clear)},
                        {Py_tp_dealloc, reinterpret_cast<void*>(setup_call_dealloc)},
                        {Py_tp_descr_get, reinterpret_cast<void*>(setup_call_get)},
                        {Py_tp_getset, kGetSet},
                        {Py_tp_members, kMembers},
                        {0, nullptr}};
PyType_Spec kSpec = {"sonde._sonde.SetupCall", sizeof(SetupCall), 0,
                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, kSlots};

PyTypeObject* g_type = nullptr;

PyObject* setup_call(PyObject*, PyObject* args) {
  PyObject *name, *function, *after;
  int wait = 0;
  if (!PyArg_ParseTuple(args, "SOO|p:setup_call", &name, &function, &after, &wait)) return nullptr;
  if (!PyCallable_Check(function) || (after != Py_None && !PyCallable_Check(after))) {
    PyErr_SetString(PyExc_TypeError, "setup_call(name, function, after): not callable");
    return nullptr;
  }
  auto* s = PyObject_GC_New(SetupCall, g_type);
  if (s == nullptr) return nullptr;
  Py_INCREF(name);
  Py_INCREF(function);
  Py_INCREF(after);
  s->name = name;
  s->function = function;
  s->after = after;
  s->dict = nullptr;
  s->wait = wait;
  PyObject_GC_Track(s);
  return reinterpret_cast<PyObject*>(s);
}

PyMethodDef kSetupCall = {
    "setup_call", setup_call, METH_VARARGS,
    "setup_call(name, function, after, wait=False): function (torch.distributed's\n"
    "init_process_group or new_group) as one set-up frame named name (bytes); after (or None)\n"
    "runs once it returned, inside that frame. wait: a wait frame (Work.wait) instead, left\n"
    "out where torch.distributed's own code calls it."};

}  // namespace

bool add_setup_call(PyObject* module) {
  g_type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kSpec));
  if (g_type == nullptr) return false;
  PyObject* fn = PyCFunction_New(&kSetupCall, nullptr);
  if (fn == nullptr || PyModule_AddObject(module, "setup_call", fn) < 0) {
    Py_XDECREF(fn);
    return false;
  }
  return true;
}

}  // namespace sonde::python
