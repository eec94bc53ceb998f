// sonde.region("forward"): user regions from Python, as context managers and decorators, on
// libsonde's region API (sonde.h).
//
// None of the callables here is a builtin function or method: the hooks that see C functions
// (the profile function, sys.monitoring's CALL) take those for frames of their own, and a region
// opened inside such a frame would be closed by that frame's return. `with` finds __enter__ and
// __exit__ through getset descriptors that hand out a plain callable object instead, and the
// decorator returns a callable of its own type, so the region opens at the level of the code
// that uses it.
#define PY_SSIZE_T_CLEAN
#include "regions.hpp"

#include <Python.h>
#include <structmember.h>

#include <algorithm>
#include <cstddef>
#include <string_view>

#include "sonde/sonde.h"

namespace sonde::python {
namespace {

// Region names live as long as the process: libsonde keys its per-thread name cache by the
// pointer, so each distinct name is kept once here and its UTF-8 buffer never moves.
PyObject* g_names = nullptr;  // dict str -> the same str

const char* stable_name(PyObject* name) {
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "a region's name must be a str");
    return nullptr;
  }
  PyObject* kept = PyDict_SetDefault(g_names, name, name);  // borrowed
  return kept == nullptr ? nullptr : PyUnicode_AsUTF8(kept);
}

// One side of a region: a callable that opens (begin) or closes it and returns what `with`
// expects (None from __enter__, False from __exit__: exceptions go on).
struct Action {
  PyObject_HEAD const char* name;
  bool begin;
  vectorcallfunc vectorcall;
};

PyObject* action_call(PyObject* self, PyObject* const*, size_t, PyObject*) {
  auto* a = reinterpret_cast<Action*>(self);
  if (a->begin) {
    sonde_region_begin(a->name);
    Py_RETURN_NONE;
  }
  sonde_region_end(a->name);
  Py_RETURN_FALSE;
}

PyTypeObject* ActionType = nullptr;

struct Region {
  PyObject_HEAD PyObject* name;
  const char* cname;
  PyObject* enter;  // Actions, made once per region
  PyObject* exit;
};

// The decorated function: the region around every call of it.
struct RegionCall {
  PyObject_HEAD const char* name;
  PyObject* func;
  PyObject* dict;  // __name__, __doc__, __wrapped__ ... (functools.update_wrapper)
  vectorcallfunc vectorcall;
};

PyObject* region_call_call(PyObject* self, PyObject* const* args, size_t nargsf,
                           PyObject* kwnames) {
  auto* c = reinterpret_cast<RegionCall*>(self);
  sonde_region_begin(c->name);
  PyObject* result = PyObject_Vectorcall(c->func, args, nargsf, kwnames);
  sonde_region_end(c->name);
  return result;
}

// A method decorated in a class body binds as the function would.
PyObject* region_call_get(PyObject* self, PyObject* obj, PyObject*) {
  if (obj == nullptr || obj == Py_None) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

int region_call_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* c = reinterpret_cast<RegionCall*>(self);
  Py_VISIT(c->func);
  Py_VISIT(c->dict);
  return 0;
}

int region_call_clear(PyObject* self) {
  auto* c = reinterpret_cast<RegionCall*>(self);
  Py_CLEAR(c->func);
  Py_CLEAR(c->dict);
  return 0;
}

void region_call_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  region_call_clear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyTypeObject* RegionCallType = nullptr;

PyObject* new_action(const char* name, bool begin) {
  Action* a = PyObject_New(Action, ActionType);
  if (a == nullptr) return nullptr;
  a->name = name;
  a->begin = begin;
  a->vectorcall = action_call;
  return reinterpret_cast<PyObject*>(a);
}

PyObject* region_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject* name = nullptr;
  static const char* kKeywords[] = {"name", nullptr};
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U", const_cast<char**>(kKeywords), &name))
    return nullptr;
  const char* cname = stable_name(name);
  if (cname == nullptr) return nullptr;
  auto* r = reinterpret_cast<Region*>(type->tp_alloc(type, 0));
  if (r == nullptr) return nullptr;
  r->name = Py_NewRef(name);
  r->cname = cname;
  r->enter = new_action(cname, true);
  r->exit = new_action(cname, false);
  if (r->enter == nullptr || r->exit == nullptr) {
    Py_DECREF(r);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(r);
}

void region_dealloc(PyObject* self) {
  auto* r = reinterpret_cast<Region*>(self);
  PyTypeObject* type = Py_TYPE(self);
  Py_XDECREF(r->name);
  Py_XDECREF(r->enter);
  Py_XDECREF(r->exit);
  type->tp_free(self);
  Py_DECREF(type);
}

PyObject* region_enter(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<Region*>(self)->enter);
}

PyObject* region_exit(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<Region*>(self)->exit);
}

PyObject* region_name(PyObject* self, void*) {
  return Py_NewRef(reinterpret_cast<Region*>(self)->name);
}

// region(func): the decorator.
PyObject* region_decorate(PyObject* self, PyObject* args, PyObject* kwargs) {
  PyObject* func = nullptr;
  if (!PyArg_UnpackTuple(args, "region", 1, 1, &func)) return nullptr;
  if (kwargs != nullptr && PyDict_GET_SIZE(kwargs) > 0) {
    PyErr_SetString(PyExc_TypeError, "region(func) takes no keyword arguments");
    return nullptr;
  }
  if (!PyCallable_Check(func)) {
    PyErr_SetString(PyExc_TypeError, "region(...) decorates a callable");
    return nullptr;
  }
  auto* c = PyObject_GC_New(RegionCall, RegionCallType);
  if (c == nullptr) return nullptr;
  c->name = reinterpret_cast<Region*>(self)->cname;
  c->func = Py_NewRef(func);
  c->dict = nullptr;
  c->vectorcall = region_call_call;
  PyObject_GC_Track(c);
  PyObject* functools = PyImport_ImportModule("functools");
  PyObject* done =
      functools ? PyObject_CallMethod(functools, "update_wrapper", "OO", c, func) : nullptr;
  Py_XDECREF(functools);
  if (done == nullptr) {
    Py_DECREF(c);
    return nullptr;
  }
  Py_DECREF(done);
  return reinterpret_cast<PyObject*>(c);
}

PyGetSetDef kRegionGetSet[] = {{"__enter__", region_enter, nullptr, "opens the region", nullptr},
                               {"__exit__", region_exit, nullptr, "closes the region", nullptr},
                               {"name", region_name, nullptr, "the region's name", nullptr},
                               {nullptr, nullptr, nullptr, nullptr, nullptr}};

// A framework's own range (torch.autograd.profiler.record_function) recorded as a region: its
// class's __enter__ and __exit__ are replaced by these, which open the region before the
// original __enter__ and close it after the original __exit__, at the level of the `with`, so
// that the originals' frames are beneath it. torch.profiler's range holds them too (its
// RecordFunction starts inside __enter__ and ends inside __exit__), and they are not free: a
// red-team DataLoader's `__next__` range spent 1.3 ms a batch in torch 1.13's __exit__, and with
// the originals outside, the region read 0.148 s where torch.profiler read 0.353 s. The
// region's name is the instance's `name`.
struct RangeHook {
  PyObject_HEAD PyObject* original;
  bool begin;
  vectorcallfunc vectorcall;
};

PyTypeObject* RangeHookType = nullptr;

// torch.profiler's step ranges, ProfilerStep#1, #2, ...: one region for all of them. They sit
// empty under prof.step() (docs/torch.md), and one region a step made `sonde report` of a
// 5,000-step run 5,000 lines of 0.000 ms (a red-team find), each name interned for good.
constexpr std::string_view kProfilerStep = "ProfilerStep#";
constexpr const char* kProfilerSteps = "ProfilerStep#*";

bool is_profiler_step(PyObject* name) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(name, &size);
  if (text == nullptr) {
    PyErr_Clear();
    return false;
  }
  std::string_view v(text, size_t(size));
  if (!v.starts_with(kProfilerStep) || v.size() == kProfilerStep.size()) return false;
  v.remove_prefix(kProfilerStep.size());
  return std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

const char* range_name(PyObject* self_obj) {
  PyObject* name = PyObject_GetAttrString(self_obj, "name");
  if (name == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  const char* c = !PyUnicode_Check(name)   ? nullptr
                  : is_profiler_step(name) ? kProfilerSteps
                                           : stable_name(name);
  Py_DECREF(name);
  if (c == nullptr) PyErr_Clear();
  return c;
}

PyObject* range_hook_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* h = reinterpret_cast<RangeHook*>(self);
  const char* name = nullptr;
  try {
    if (PyVectorcall_NARGS(nargsf) > 0) name = range_name(args[0]);
  } catch (...) {  // no memory for the name: the range runs, unrecorded (out_of_memory.hpp)
    name = nullptr;
  }
  if (h->begin && name != nullptr) sonde_region_begin(name);
  PyObject* result = PyObject_Vectorcall(h->original, args, nargsf, kwnames);
  // An __enter__ that raised runs no body and no __exit__: its region ends with it.
  if (name != nullptr && (!h->begin || result == nullptr)) sonde_region_end(name);
  return result;
}

int range_hook_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<RangeHook*>(self)->original);
  return 0;
}

int range_hook_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<RangeHook*>(self)->original);
  return 0;
}

void range_hook_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_GC_UnTrack(self);
  range_hook_clear(self);
  type->tp_free(self);
  Py_DECREF(type);
}

PyMemberDef kRangeHookMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(RangeHook, vectorcall), READONLY, nullptr},
    {"__wrapped__", T_OBJECT, offsetof(RangeHook, original), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot kRangeHookSlots[] = {{Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
                                 {Py_tp_descr_get, reinterpret_cast<void*>(region_call_get)},
                                 {Py_tp_traverse, reinterpret_cast<void*>(range_hook_traverse)},
                                 {Py_tp_clear, reinterpret_cast<void*>(range_hook_clear)},
                                 {Py_tp_dealloc, reinterpret_cast<void*>(range_hook_dealloc)},
                                 {Py_tp_members, kRangeHookMembers},
                                 {0, nullptr}};
PyType_Spec kRangeHookSpec = {"sonde._sonde.RangeHook", sizeof(RangeHook), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                              kRangeHookSlots};

PyObject* new_range_hook(PyObject* original, bool begin) {
  auto* h = PyObject_GC_New(RangeHook, RangeHookType);
  if (h == nullptr) return nullptr;
  h->original = Py_NewRef(original);
  h->begin = begin;
  h->vectorcall = range_hook_call;
  PyObject_GC_Track(h);
  return reinterpret_cast<PyObject*>(h);
}

// record_ranges(cls): cls's `with` blocks become regions named by the instance's `name`. Once per
// class: a second call finds the hooks in place and leaves them.
PyObject* record_ranges(PyObject*, PyObject* cls) {
  if (!PyType_Check(cls)) {
    PyErr_SetString(PyExc_TypeError, "record_ranges(cls) takes a class");
    return nullptr;
  }
  const char* methods[] = {"__enter__", "__exit__"};
  for (int i = 0; i < 2; ++i) {
    PyObject* original = PyObject_GetAttrString(cls, methods[i]);
    if (original == nullptr) return nullptr;
    bool done = Py_IS_TYPE(original, RangeHookType);
    PyObject* hook = done ? nullptr : new_range_hook(original, i == 0);
    Py_DECREF(original);
    if (done) continue;
    if (hook == nullptr || PyObject_SetAttrString(cls, methods[i], hook) < 0) {
      Py_XDECREF(hook);
      return nullptr;
    }
    Py_DECREF(hook);
  }
  Py_RETURN_NONE;
}

PyMethodDef kRecordRanges = {"record_ranges", record_ranges, METH_O,
                             "record_ranges(cls): record the `with` blocks of cls (a context "
                             "manager with a `name`, such as torch's record_function) as sonde "
                             "regions of that name."};

void action_dealloc(PyObject* self) {
  PyTypeObject* type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type);  // a heap type's instances hold it
}

PyGetSetDef kRegionCallGetSet[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMemberDef kActionMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Action, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyMemberDef kRegionCallMembers[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(RegionCall, vectorcall), READONLY, nullptr},
    {"__dictoffset__", T_PYSSIZET, offsetof(RegionCall, dict), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};

PyType_Slot kActionSlots[] = {{Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
                              {Py_tp_dealloc, reinterpret_cast<void*>(action_dealloc)},
                              {Py_tp_members, kActionMembers},
                              {0, nullptr}};
PyType_Spec kActionSpec = {"sonde._sonde.RegionAction", sizeof(Action), 0,
                           Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, kActionSlots};

PyType_Slot kRegionSlots[] = {
    {Py_tp_doc, const_cast<char*>("Region(name): a named region of sonde's calling-context "
                                  "tree, opened by `with` and around each call of a function it "
                                  "decorates.")},
    {Py_tp_new, reinterpret_cast<void*>(region_new)},
    {Py_tp_dealloc, reinterpret_cast<void*>(region_dealloc)},
    {Py_tp_call, reinterpret_cast<void*>(region_decorate)},
    {Py_tp_getset, kRegionGetSet},
    {0, nullptr}};
PyType_Spec kRegionSpec = {"sonde._sonde.Region", sizeof(Region), 0, Py_TPFLAGS_DEFAULT,
                           kRegionSlots};

PyType_Slot kRegionCallSlots[] = {{Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
                                  {Py_tp_descr_get, reinterpret_cast<void*>(region_call_get)},
                                  {Py_tp_traverse, reinterpret_cast<void*>(region_call_traverse)},
                                  {Py_tp_clear, reinterpret_cast<void*>(region_call_clear)},
                                  {Py_tp_dealloc, reinterpret_cast<void*>(region_call_dealloc)},
                                  {Py_tp_getset, kRegionCallGetSet},
                                  {Py_tp_members, kRegionCallMembers},
                                  {0, nullptr}};
PyType_Spec kRegionCallSpec = {"sonde._sonde.RegionCall", sizeof(RegionCall), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
                               kRegionCallSlots};

}  // namespace

bool add_region_types(PyObject* module) {
  if (g_names == nullptr && (g_names = PyDict_New()) == nullptr) return false;
  ActionType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kActionSpec));
  RegionCallType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kRegionCallSpec));
  RangeHookType = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&kRangeHookSpec));
  PyObject* region = PyType_FromSpec(&kRegionSpec);
  if (ActionType == nullptr || RegionCallType == nullptr || RangeHookType == nullptr ||
      region == nullptr)
    return false;
  PyObject* record = PyCFunction_New(&kRecordRanges, nullptr);
  if (record == nullptr || PyModule_AddObject(module, "record_ranges", record) < 0) {
    Py_XDECREF(record);
    return false;
  }
  return PyModule_AddObject(module, "Region", region) == 0;
}

}  // namespace sonde::python
