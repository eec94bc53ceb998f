#include "getitem_guard.hpp"  // first: it sets Py_BUILD_CORE for 3.11's frames

#if SONDE_EVAL_FRAME == 311

#include <cstdint>
#include <unordered_set>
#include <vector>

namespace sonde::python {

bool g_getitem_guard = false;

namespace {

uint32_t g_next_version = UINT32_MAX;
constexpr uint32_t kLastVersion = 0x80000000u;  // then the guard stops: 2^31 functions

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

}  // namespace

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

void getitem_guard_start() {
  if (Py_Version < 0x030B0400 && !g_getitem_guard) {
    g_getitem_guard = true;
    guard_existing_classes();
  }
}

}  // namespace sonde::python

#endif
