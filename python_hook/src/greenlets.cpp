#include "greenlets.hpp"

#include <unordered_map>
#include <vector>

#include "eval_frame.hpp"
#include "frames.hpp"
#include "sonde/probe.hpp"

namespace sonde::python {

namespace {

// What a switched-out greenlet left open: its sonde frames and the hooks' own per-thread state.
// Kept from the greenlet's first switch until it ends or is freed.
struct SetAside {
  PyObject* greenlet_ref = nullptr;  // weak, with a callback that drops the entry when it dies
  const void* owner = nullptr;       // the thread state the frames belong to
  std::vector<SuspendedFrame> frames;
  std::vector<OpenedFrame> profile_frames;
  bool in_machinery = false;
};

// Keyed by the greenlet object; the GIL guards it. Never destroyed: its weak references must
// not be released after the interpreter has gone.
std::unordered_map<PyObject*, SetAside>* g_set_aside = nullptr;

bool g_found = false;            // greenlet is imported: looked for no more
PyObject* g_settrace = nullptr;  // greenlet.settrace
PyObject* g_tracer = nullptr;    // sonde's tracer, a C function; nullptr: switches not followed
// The tracer the thread had before sonde's, called after it (gevent's monitor chains too).
PyObject* g_previous = nullptr;
// The running greenlet's frames as they are set aside; never destroyed, as the map.
std::vector<SuspendedFrame>* g_buffer = nullptr;

void forget(PyObject* greenlet) {
  auto it = g_set_aside->find(greenlet);
  if (it == g_set_aside->end()) return;
  PyObject* ref = it->second.greenlet_ref;
  g_set_aside->erase(it);
  Py_XDECREF(ref);
}

// The weak reference's callback, bound to the greenlet's address: a greenlet freed (one whose
// thread ended, or dropped unfinished and not killed) never switches again.
PyObject* greenlet_freed(PyObject* address, PyObject* ref) {
  auto it = g_set_aside->find(static_cast<PyObject*>(PyLong_AsVoidPtr(address)));
  if (it != g_set_aside->end() && it->second.greenlet_ref == ref) forget(it->first);
  PyErr_Clear();
  Py_RETURN_NONE;
}

PyMethodDef g_freed_def = {"_sonde_greenlet_freed", greenlet_freed, METH_O, nullptr};

// A weak reference to `greenlet` whose death forgets its entry; nullptr when it cannot be had.
PyObject* watch(PyObject* greenlet) {
  PyObject* address = PyLong_FromVoidPtr(greenlet);
  PyObject* callback = address != nullptr ? PyCFunction_New(&g_freed_def, address) : nullptr;
  PyObject* ref = callback != nullptr ? PyWeakref_NewRef(greenlet, callback) : nullptr;
  Py_XDECREF(callback);
  Py_XDECREF(address);
  if (ref == nullptr) PyErr_Clear();
  return ref;
}

// greenlet 2's C API (greenlet.h: the capsule greenlet._C_API, entry 10 PyGreenlet_ACTIVE) says
// whether a greenlet that has run is still alive without an attribute lookup; older greenlets'
// API has no such entry, and their `dead` attribute is read instead.
using ActiveFn = int (*)(PyObject*);
ActiveFn g_active = nullptr;

void find_active_fn(PyObject* module) {
  PyObject* version = PyObject_GetAttrString(module, "__version__");
  const char* text =
      version != nullptr && PyUnicode_Check(version) ? PyUnicode_AsUTF8(version) : nullptr;
  if (text != nullptr && text[0] >= '2' && text[0] <= '9' && text[1] == '.') {
    auto** api = static_cast<void**>(PyCapsule_Import("greenlet._C_API", 0));
    if (api != nullptr) g_active = reinterpret_cast<ActiveFn>(api[10]);
  }
  Py_XDECREF(version);
  PyErr_Clear();
}

// For a greenlet that has run (the origin of a switch).
bool has_ended(PyObject* greenlet) {
  if (g_active != nullptr) return g_active(greenlet) == 0;
  PyObject* dead = PyObject_GetAttrString(greenlet, "dead");
  int ended = dead != nullptr ? PyObject_IsTrue(dead) : -1;
  Py_XDECREF(dead);
  if (ended < 0) PyErr_Clear();
  return ended == 1;
}

// Called by greenlet after the switch, on the target's stack, before the target runs on.
void switch_stacks(PyObject* origin, PyObject* target) {
  if (g_set_aside == nullptr) {
    g_set_aside = new std::unordered_map<PyObject*, SetAside>();
    g_buffer = new std::vector<SuspendedFrame>();
  }
  std::vector<SuspendedFrame>& buffer = *g_buffer;
  const void* owner = nullptr;
  uint32_t cap = uint32_t(buffer.size());
  uint32_t n = probe_suspend_stack(buffer.data(), cap, &owner);
  if (n > cap) {
    buffer.resize(n);
    n = probe_suspend_stack(buffer.data(), n, &owner);
  }
  std::vector<OpenedFrame>& profile_frames = profile_hook_frames();
  bool& in_machinery = eval_frame_in_machinery();
  // An ended greenlet's frames have all returned; whatever is left is not to come back.
  bool ended = has_ended(origin);
  bool watch_origin = false;
  if (ended) {
    forget(origin);
  } else {
    SetAside& s = (*g_set_aside)[origin];
    watch_origin = s.greenlet_ref == nullptr;
    s.owner = owner;
    s.frames.assign(buffer.begin(), buffer.begin() + n);
    s.profile_frames.swap(profile_frames);
    s.in_machinery = in_machinery;
  }
  profile_frames.clear();
  in_machinery = false;
  auto it = g_set_aside->find(target);
  if (it != g_set_aside->end()) {
    SetAside& s = it->second;
    // An entry not yet watched was made by the switch this one happens inside (below), which
    // has not finished with it: its frames are not taken up here.
    if (s.greenlet_ref != nullptr && PyWeakref_GetObject(s.greenlet_ref) == target) {
      probe_resume_stack(s.owner, s.frames.data(), uint32_t(s.frames.size()));
      profile_frames.swap(s.profile_frames);
      in_machinery = s.in_machinery;
    }
    s.frames.clear();  // running again: set aside anew at its next switch
    s.profile_frames.clear();
  }
  // Last, once the stacks are as they should be: making the weak reference allocates, which
  // may collect a suspended greenlet, which greenlet kills by switching into it (a switch
  // within this one).
  if (watch_origin) {
    PyObject* ref = watch(origin);
    auto entry = g_set_aside->find(origin);
    if (entry == g_set_aside->end()) {
      Py_XDECREF(ref);
    } else if (ref == nullptr) {
      g_set_aside->erase(entry);  // its death would go unseen: not kept
    } else {
      entry->second.greenlet_ref = ref;
    }
  }
}

// tracer(event, (origin, target)), as greenlet calls it.
PyObject* trace_switch(PyObject*, PyObject* args) {
  PyObject* pair = PyTuple_GET_SIZE(args) == 2 ? PyTuple_GET_ITEM(args, 1) : nullptr;
  if (pair != nullptr && PyTuple_Check(pair) && PyTuple_GET_SIZE(pair) == 2) {
    switch_stacks(PyTuple_GET_ITEM(pair, 0), PyTuple_GET_ITEM(pair, 1));
  }
  if (g_previous != nullptr) return PyObject_Call(g_previous, args, nullptr);
  Py_RETURN_NONE;
}

PyMethodDef g_tracer_def = {"_sonde_greenlet_switch", trace_switch, METH_VARARGS, nullptr};

// Makes sonde's tracer this thread's, keeping the one it replaces.
void follow_this_thread() {
  if (g_tracer == nullptr) return;
  PyObject* previous = PyObject_CallOneArg(g_settrace, g_tracer);
  if (previous == nullptr) {
    PyErr_Clear();
    return;
  }
  if (previous == Py_None || previous == g_tracer) {
    Py_DECREF(previous);
  } else {
    Py_XSETREF(g_previous, previous);
  }
}

}  // namespace

bool greenlets_followed() { return g_found; }

void greenlets_import_ended() {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  static PyObject* name = PyUnicode_InternFromString("greenlet");
  PyObject* module = name != nullptr ? PyImport_GetModule(name) : nullptr;
  if (module != nullptr) {
    g_found = true;
    find_active_fn(module);
    g_settrace = PyObject_GetAttrString(module, "settrace");
    g_tracer = g_settrace != nullptr ? PyCFunction_New(&g_tracer_def, nullptr) : nullptr;
    follow_this_thread();
    Py_DECREF(module);
  }
  PyErr_Clear();
  PyErr_Restore(type, value, traceback);
}

}  // namespace sonde::python
