#include "runtime/python_fork.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "runtime/runtime.hpp"

namespace sonde {

namespace {

// CPython's objects, never looked into: pointers passed between its own functions.
struct PyObject;
using PyCFunction = PyObject* (*)(PyObject*, PyObject*);
// PyMethodDef as the stable ABI defines it (unchanged since 3.2).
struct PyMethodDef {
  const char* ml_name;
  PyCFunction ml_meth;
  int ml_flags;
  const char* ml_doc;
};
constexpr int kMethNoArgs = 0x0004;

// The functions used, all of the stable ABI but PySys_AddAuditHook (public since 3.8).
struct PythonApi {
  int (*is_initialized)();
  int (*add_audit_hook)(int (*)(const char*, PyObject*, void*), void*);
  PyObject* (*import_module)(const char*);
  PyObject* (*get_attr)(PyObject*, const char*);
  int (*set_attr)(PyObject*, const char*, PyObject*);
  PyObject* (*new_function)(PyMethodDef*, PyObject*, PyObject*);
  PyObject* (*new_string)(const char*);
  PyObject* (*call_no_args)(PyObject*);
  void (*dec_ref)(PyObject*);
  void (*clear_error)();
  void* (*save_thread)();
  void (*restore_thread)(void*);
};

template <typename F>
bool look_up(F& fn, const char* name) {
  fn = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  return fn != nullptr;
}

// The interpreter's API where it is CPython 3.12 or later (Py_Version, exported since 3.11),
// else null. Looked up while the loader may be asked (library start, the hook's start()).
const PythonApi* python_api() {
  static const PythonApi* api = []() -> const PythonApi* {
    static PythonApi a;
    const auto* version = static_cast<const unsigned long*>(dlsym(RTLD_DEFAULT, "Py_Version"));
    if (version == nullptr || *version < 0x030C0000) return nullptr;
    bool all = look_up(a.is_initialized, "Py_IsInitialized") &&
               look_up(a.add_audit_hook, "PySys_AddAuditHook") &&
               look_up(a.import_module, "PyImport_ImportModule") &&
               look_up(a.get_attr, "PyObject_GetAttrString") &&
               look_up(a.set_attr, "PyObject_SetAttrString") &&
               look_up(a.new_function, "PyCFunction_NewEx") &&
               look_up(a.new_string, "PyUnicode_FromString") &&
               look_up(a.call_no_args, "PyObject_CallNoArgs") && look_up(a.dec_ref, "Py_DecRef") &&
               look_up(a.clear_error, "PyErr_Clear") &&
               look_up(a.save_thread, "PyEval_SaveThread") &&
               look_up(a.restore_thread, "PyEval_RestoreThread");
    return all ? &a : nullptr;
  }();
  return api;
}

PyObject* g_fork = nullptr;     // the real posix.fork
PyObject* g_forkpty = nullptr;  // the real posix.forkpty, where the platform has one
std::atomic<bool> g_guarded{false};

// Called with the GIL: the wait for the flusher, which never takes the GIL, is bounded (as
// long as a flush under way may wait for the file), and the GIL is let go meanwhile so that
// the program's other threads run. Threads forking at once share one pause (the runtime counts
// them); each pause is paired with its resume, which in the child is a no-op (its own flusher
// runs already).
PyObject* without_flusher(PyObject* real) {
  const PythonApi& api = *python_api();
  Runtime* rt = Runtime::get();
  bool paused = false;
  if (rt != nullptr) {
    void* state = api.save_thread();
    paused = rt->flusher_paused_for_fork();
    api.restore_thread(state);
  }
  PyObject* result = api.call_no_args(real);
  if (paused) rt->flusher_resumed_after_fork();
  return result;
}

PyObject* fork(PyObject*, PyObject*) { return without_flusher(g_fork); }
PyObject* forkpty(PyObject*, PyObject*) { return without_flusher(g_forkpty); }

// The originals' text signatures first, so that inspect.signature(os.fork) reads as before.
PyMethodDef kFork = {"fork", fork, kMethNoArgs,
                     "fork($module, /)\n--\n\nFork a child process.\n\nReturn 0 to child "
                     "process and PID of child to parent process."};
PyMethodDef kForkpty = {"forkpty", forkpty, kMethNoArgs,
                        "forkpty($module, /)\n--\n\nFork a new process with a new "
                        "pseudo-terminal as controlling tty.\n\nReturns a tuple of (pid, "
                        "master_fd)."};

// `name` of posix, and of os where it is the same object, replaced by `def`'s wrapper.
bool wrap(const PythonApi& api, const char* name, PyMethodDef* def, PyObject** real) {
  PyObject* posix = api.import_module("posix");
  if (posix == nullptr) return false;
  PyObject* original = api.get_attr(posix, name);
  if (original == nullptr) {  // not on this platform
    api.clear_error();
    api.dec_ref(posix);
    return true;
  }
  PyObject* module_name = api.new_string("posix");
  // Bound to posix, as the original: its __self__, and inspect.signature's `()`.
  PyObject* wrapper = module_name ? api.new_function(def, posix, module_name) : nullptr;
  if (module_name != nullptr) api.dec_ref(module_name);
  bool ok = wrapper != nullptr;
  if (ok) {
    *real = original;  // kept for the process's life
    PyObject* os = api.import_module("os");
    if (os != nullptr) {
      PyObject* in_os = api.get_attr(os, name);
      if (in_os == original) ok = api.set_attr(os, name, wrapper) == 0;
      if (in_os == nullptr) api.clear_error();
      if (in_os != nullptr) api.dec_ref(in_os);
      api.dec_ref(os);
    } else {
      ok = false;
    }
    ok = ok && api.set_attr(posix, name, wrapper) == 0;
    api.dec_ref(wrapper);
  } else {
    api.dec_ref(original);
  }
  api.dec_ref(posix);
  return ok;
}

// Every audit event of the process comes here (CPython keeps a hook for the process's life):
// after the guard, one load. `cpython.run_file`, `_command`, `_module`, `_stdin`,
// `_startup` and `_interactivehook` come from the interpreter's main, as the program's first
// code is about to run; an embedding program raises none, and forks unguarded.
int audit_hook(const char* event, PyObject*, void*) {
  if (g_guarded.load(std::memory_order_relaxed)) return 0;
  if (std::strncmp(event, "cpython.run_", 12) == 0) guard_python_fork();
  return 0;
}

// Whether the interpreter will free memory through CPython's debug hooks: a hook added before
// it starts is allocated by the plain allocator and freed at its end by the configured one,
// and the debug hooks abort the process there ("Fatal Python error: _PyMem_DebugRawFree: bad
// ID", 3.12 and 3.13 under PYTHONMALLOC=debug or -X dev). They are on under PYTHONMALLOC=*debug,
// in development mode (-X dev, PYTHONDEVMODE) and in a debug build (Py_REF_DEBUG's symbols).
// Asked before -E or -I may set the variables aside: where unsure, no hook.
bool debug_allocator_ahead(const std::vector<std::string>& args) {
  const char* malloc_env = std::getenv("PYTHONMALLOC");
  const char* dev_env = std::getenv("PYTHONDEVMODE");
  if ((malloc_env != nullptr && std::strstr(malloc_env, "debug") != nullptr) ||
      (dev_env != nullptr && *dev_env != '\0') ||
      dlsym(RTLD_DEFAULT, "_Py_GetGlobalRefTotal") != nullptr ||
      dlsym(RTLD_DEFAULT, "_Py_NegativeRefcount") != nullptr)
    return true;
  // The interpreter's options, up to the script, -c or -m: `-X dev`, `-Xdev`.
  for (size_t i = 1; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a.size() < 2 || a[0] != '-' || a == "-c" || a == "-m" || a == "--") break;
    std::string_view x;
    if (a == "-X" && i + 1 < args.size()) {
      x = args[++i];
    } else if (a.starts_with("-X")) {
      x = a.substr(2);
    } else if ((a == "-W" || a == "--check-hash-based-pycs") && i + 1 < args.size()) {
      ++i;
    }
    if (x == "dev" || x.starts_with("dev=")) return true;
  }
  return false;
}

// CPython's own main (python3, python3.12, a venv's link to it), whose run_* events come:
// a program that embeds the interpreter may set a debug allocator through PyPreConfig.
bool python_executable() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  std::string_view path(exe, static_cast<size_t>(n));
  std::string_view base = path.substr(path.rfind('/') + 1);
  return base.starts_with("python");
}

}  // namespace

void watch_for_python_start(const std::vector<std::string>& args) {
  const PythonApi* api = python_api();
  // Initialized already: libsonde was loaded by the program (python3 -m sonde's own process),
  // whose hook guards at its start.
  if (api == nullptr || api->is_initialized() != 0) return;
  if (!python_executable() || debug_allocator_ahead(args)) return;
  api->add_audit_hook(audit_hook, nullptr);
}

bool guard_python_fork() {
  const PythonApi* api = python_api();
  // Under the GIL: one caller at a time, the flag set first for the imports' own events.
  if (api == nullptr || g_guarded.exchange(true)) return true;
  bool ok = wrap(*api, "fork", &kFork, &g_fork) && wrap(*api, "forkpty", &kForkpty, &g_forkpty);
  if (!ok) api->clear_error();
  return ok;
}

}  // namespace sonde
