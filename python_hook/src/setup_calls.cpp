#include "setup_calls.hpp"

#include <structmember.h>

#include <cstddef>

// libsonde's (wrappers/torch/torch_attach.cpp): the set-up frame and its comm op.
extern "C" {
void sonde_torch_setup_begin(const char* name);
void sonde_torch_setup_end(void);
}

namespace sonde::python {

namespace {

struct SetupCall {
  PyObject_HEAD PyObject* name;  // bytes: its buffer is what libsonde is given
  PyObject* function;            // the wrapped one
  PyObject* after;               // None, or a callable run before the frame closes
  PyObject* dict;                // functools.update_wrapper's __wrapped__, __name__, __doc__, ...
};

PyObject* setup_call_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  auto* s = reinterpret_cast<SetupCall*>(self);
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
                        {Py_tp_getset, kGetSet},
                        {Py_tp_members, kMembers},
                        {0, nullptr}};
PyType_Spec kSpec = {"sonde._sonde.SetupCall", sizeof(SetupCall), 0,
                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, kSlots};

PyTypeObject* g_type = nullptr;

PyObject* setup_call(PyObject*, PyObject* args) {
  PyObject *name, *function, *after;
  if (!PyArg_ParseTuple(args, "SOO:setup_call", &name, &function, &after)) return nullptr;
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
  PyObject_GC_Track(s);
  return reinterpret_cast<PyObject*>(s);
}

PyMethodDef kSetupCall = {
    "setup_call", setup_call, METH_VARARGS,
    "setup_call(name, function, after): function (torch.distributed's init_process_group or\n"
    "new_group) as one set-up frame named name (bytes); after (or None) runs once it returned,\n"
    "inside that frame."};

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
