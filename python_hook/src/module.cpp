// sonde._sonde: the C extension behind `python3 -m sonde`. It needs libsonde.so loaded in the
// global scope (preloaded), where the probe API and the BLAS interposition live.
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <unistd.h>

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "code_table.hpp"
#include "eval_frame.hpp"
#include "frames.hpp"
#include "greenlets.hpp"
#include "monitoring.hpp"
#include "regions.hpp"
#include "sonde/in_process.hpp"
#include "sonde/probe.hpp"
#include "sonde/sonde.h"

namespace {

// Which hook records the frames. By default the cheapest this build has: the frame-evaluation
// hook on 3.10 and 3.11, sys.monitoring on 3.12+ (Python frames only). With builtins (C functions
// too): sys.monitoring on 3.12+, else CPython's profile function, which is also the fallback when
// another tool holds sonde's sys.monitoring tool id.
enum class Hook { kNone, kEvalFrame, kMonitoring, kProfile };
Hook g_hook = Hook::kNone;

const char* hook_name(Hook h) {
  switch (h) {
    case Hook::kEvalFrame:
      return "eval_frame";
    case Hook::kMonitoring:
      return "monitoring";
    default:
      return "profile";
  }
}

void stop_hooks() {
  switch (g_hook) {
    case Hook::kProfile:
      if (sonde::python::profile_function_replaced()) {
        sonde::add_run_note(
            "python",
            "a profile function of the program's own (a profiler it ran: cProfile, "
            "yappi, sys.setprofile) took the place of sonde's on a thread: while it "
            "was there, that thread's Python frames were not recorded (its native "
            "calls were, under the last frame recorded). The default mode, without "
            "--builtins, records beside such profilers");
      }
      if (sonde::python::threading_hook_replaced()) {
        sonde::add_run_note(
            "python",
            "the program replaced the hook threading gives the threads it starts "
            "(threading.setprofile): Python frames of threads started after that "
            "were not recorded (their native calls were). The default mode, without "
            "--builtins, records them");
      }
      sonde::python::uninstall_all_threads();  // the line tracing too
      break;
    case Hook::kEvalFrame:
      sonde::python::uninstall_eval_frame();
      sonde::python::uninstall_line_tracing();
      break;
    case Hook::kMonitoring:
      sonde::python::uninstall_monitoring();
      sonde::python::uninstall_line_tracing();
      break;
    case Hook::kNone:
      break;
  }
  g_hook = Hook::kNone;
}

// Installs the hook for `builtins`; kNone with a Python exception set on failure.
Hook install(bool builtins) {
  using namespace sonde::python;
  if (!builtins && eval_frame_available())
    return install_eval_frame() ? Hook::kEvalFrame : Hook::kNone;
  if (monitoring_available()) {
    if (install_monitoring(builtins)) return Hook::kMonitoring;
    if (PyErr_Occurred()) return Hook::kNone;  // else another tool has the id: fall back
  }
  return install_all_threads(builtins) ? Hook::kProfile : Hook::kNone;
}

PyObject* start(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"skip_calls", "lines",   "builtins",
                                    "skip_exec",  "imports", nullptr};
  int skip_calls = 0;
  PyObject* lines = nullptr;
  int builtins = 0;
  int skip_exec = 0;
  int imports = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$iOppp", const_cast<char**>(kKeywords),
                                   &skip_calls, &lines, &builtins, &skip_exec, &imports)) {
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
  // libsonde declined this process (its profile could not be created: `ulimit -f`, a full disk;
  // it has said why on stderr): the program runs unprofiled, as under LD_PRELOAD. Raising here
  // ended `python3 -m sonde` before the script ran.
  if (!sonde_active()) Py_RETURN_NONE;
  // Sub-interpreters (their site imports sonde's sitecustomize too) are not recorded: the hooks
  // and sonde's per-code table belong to the main interpreter.
  if (PyInterpreterState_Get() != PyInterpreterState_Main()) Py_RETURN_NONE;
  if (!sonde::python::code_table_init()) return nullptr;
  stop_hooks();  // a second start() may choose another hook
  sonde::python::set_fold_imports(!imports);
  g_hook = install(builtins);
  if (g_hook == Hook::kNone) return nullptr;
  // Imported already (a start() from the program): its switches are followed from here on.
  if (g_hook != Hook::kMonitoring && !sonde::python::greenlets_followed())
    sonde::python::greenlets_import_ended();
  // The launcher's exec (a C function) comes next: only hooks that see C functions see it.
  bool sees_c_calls = builtins && (g_hook == Hook::kProfile || g_hook == Hook::kMonitoring);
  int skip = skip_calls + (skip_exec && sees_c_calls ? 1 : 0);
  switch (g_hook) {
    case Hook::kEvalFrame:
      sonde::python::eval_frame_skip_calls(skip);
      break;
    case Hook::kMonitoring:
      sonde::python::monitoring_skip_calls(skip);
      break;
    default:
      sonde::python::skip_calls(skip);
      break;
  }
  if (!sonde::python::install_line_tracing(patterns)) return nullptr;
  // Which hook records this process's frames (run_info python.hook); a Python process of the
  // run without it gets a note instead (runtime/python_presence.cpp).
  sonde::set_run_fact("python.hook", hook_name(g_hook));
  return PyUnicode_FromString(hook_name(g_hook));
}

PyObject* stop(PyObject*, PyObject*) {
  stop_hooks();
  Py_RETURN_NONE;
}

// torch's intra-op thread count, when the program has imported torch (sonde never imports
// it): the count its oneDNN and ATen kernels run with where the library itself cannot say
// (docs/metrics.md). Read with the GIL held, at each flush the Python side asks for (the
// launcher's record_facts at exit among them), so the count the program ended with is recorded.
void record_torch_threads() {
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  PyObject* torch = modules ? PyMapping_GetItemString(modules, "torch") : nullptr;
  if (torch == nullptr || torch == Py_None) {
    Py_XDECREF(torch);
    PyErr_Clear();
    return;
  }
  // A torch still being imported has no get_num_threads yet: nothing to record.
  PyObject* count = PyObject_CallMethod(torch, "get_num_threads", nullptr);
  Py_DECREF(torch);
  long n = count != nullptr && PyLong_Check(count) ? PyLong_AsLong(count) : -1;
  Py_XDECREF(count);
  PyErr_Clear();
  if (n > 0 && n <= 65535) sonde::set_run_fact("torch.num_threads", std::to_string(n).c_str());
}

PyObject* flush(PyObject*, PyObject*) {
  record_torch_threads();
  int rc;
  Py_BEGIN_ALLOW_THREADS rc = sonde_flush();
  Py_END_ALLOW_THREADS return PyBool_FromLong(rc == 0);
}

PyObject* active(PyObject*, PyObject*) { return PyBool_FromLong(sonde_active()); }

PyObject* record_facts(PyObject*, PyObject*) {
  record_torch_threads();
  Py_RETURN_NONE;
}

// The in-process launch (sonde/in_process.hpp): what the preloaded libc wrappers would do.
PyObject* in_process(PyObject*, PyObject* arg) {
  const char* shown = PyUnicode_AsUTF8(arg);
  if (shown == nullptr) return nullptr;
  return PyBool_FromLong(sonde::in_process_begin(shown));
}

PyObject* exit_begins(PyObject*, PyObject*) {
  Py_BEGIN_ALLOW_THREADS sonde::in_process_exit_begins();  // may wait for a periodic flush
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

// The interpreter's start-up and teardown, named in the main thread's tree where they were
// the root's own time (88 % of `python3 -m sonde -c "import json"`, unnamed): start-up from
// the thread's start (libsonde's, before Py_Initialize) to the hook's, teardown from the
// launcher's last atexit call (after the hook has stopped) to the final flush. Registered here,
// where the hook's other names are: kind python, as <import>.
PyObject* startup_ends(PyObject*, PyObject*) {
  static sonde::RoutineId id =
      sonde::register_routine({"<interpreter start-up>", "python", "", "", 0});
  sonde::probe_since_thread_start(id);
  Py_RETURN_NONE;
}

PyObject* teardown_begins(PyObject*, PyObject*) {
  static sonde::RoutineId id =
      sonde::register_routine({"<interpreter teardown>", "python", "", "", 0});
  sonde::probe_open_until_exit(id);
  Py_RETURN_NONE;
}

// os._exit as CPython's: the final flush first. C functions, these three, so that the Python
// hook records no frame of sonde's own under the program's call.
// Its argument read as os._exit's (status=, a C int, __index__), errors worded as CPython's.
PyObject* exit_now(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"status", nullptr};
  PyObject* arg;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:_exit", const_cast<char**>(kKeywords), &arg)) {
    return nullptr;
  }
  int overflow = 0;
  long value = PyLong_AsLongAndOverflow(arg, &overflow);
  if (value == -1 && PyErr_Occurred()) return nullptr;
  if (overflow != 0 || value > INT_MAX || value < INT_MIN) {
    PyErr_SetString(PyExc_OverflowError, "Python int too large to convert to C int");
    return nullptr;
  }
  int status = int(value);
  Py_BEGIN_ALLOW_THREADS sonde::in_process_before_exit(status);
  Py_END_ALLOW_THREADS _exit(status);
}

PyObject* string_list(const std::vector<std::string>& items) {
  PyObject* list = PyList_New(Py_ssize_t(items.size()));
  if (list == nullptr) return nullptr;
  for (size_t i = 0; i < items.size(); ++i) {
    PyObject* s = PyUnicode_DecodeFSDefault(items[i].c_str());
    if (s == nullptr) {
      Py_DECREF(list);
      return nullptr;
    }
    PyList_SET_ITEM(list, Py_ssize_t(i), s);
  }
  return list;
}

// A mapping's entries as 'NAME=value' in the file system's encoding (bytes names and values
// too), read as posix.execve reads it (keys and values, not items(), which a mapping of its own
// may give in any shape). False, with no exception, where posix.execve would refuse it (not a
// mapping, a name or value it cannot take, a NUL anywhere, an empty name or one with '='): it
// must then see the mapping as it came and raise, never a joined copy cut at the NUL, which it
// would run.
bool environment_entries(PyObject* mapping, std::vector<std::string>& out) {
  PyObject* keys = PyMapping_Keys(mapping);
  PyObject* values = keys ? PyMapping_Values(mapping) : nullptr;
  bool ok = values != nullptr && PyList_GET_SIZE(keys) == PyList_GET_SIZE(values);
  for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(keys); ++i) {
    std::string entry;
    for (int part = 0; ok && part < 2; ++part) {
      PyObject* o = PyList_GET_ITEM(part == 0 ? keys : values, i);
      PyObject* bytes = PyBytes_Check(o) ? (Py_INCREF(o), o) : PyUnicode_EncodeFSDefault(o);
      if (bytes == nullptr) {
        ok = false;
        break;
      }
      std::string_view text(PyBytes_AS_STRING(bytes), size_t(PyBytes_GET_SIZE(bytes)));
      ok = text.find('\0') == std::string_view::npos &&
           (part == 1 || (!text.empty() && text.find('=') == std::string_view::npos));
      entry.append(text);
      if (part == 0) entry += '=';
      Py_DECREF(bytes);
    }
    if (ok) out.push_back(std::move(entry));
  }
  Py_XDECREF(keys);
  Py_XDECREF(values);
  PyErr_Clear();
  return ok;
}

// CPython's own posix.execv and posix.execve, kept when take_os put sonde's in their place.
PyObject* g_posix_execv = nullptr;
PyObject* g_posix_execve = nullptr;

// 'NAME=value' entries as the dict posix.execve and posix_spawn take; nullptr with the error.
PyObject* entries_dict(const std::vector<std::string>& entries) {
  PyObject* dict = PyDict_New();
  for (const std::string& entry : entries) {
    size_t eq = entry.find('=');
    if (dict == nullptr || eq == std::string::npos || eq == 0) continue;
    PyObject* k = PyUnicode_DecodeFSDefaultAndSize(entry.data(), Py_ssize_t(eq));
    PyObject* v =
        PyUnicode_DecodeFSDefaultAndSize(entry.data() + eq + 1, Py_ssize_t(entry.size() - eq - 1));
    if (!k || !v || PyDict_SetItem(dict, k, v) < 0) Py_CLEAR(dict);
    Py_XDECREF(k);
    Py_XDECREF(v);
  }
  return dict;
}

// posix.NAME(*args): CPython's own exec, for the calls it refuses with its own message.
PyObject* posix_call(const char* name, PyObject* args) {
  PyObject* own = std::strcmp(name, "execv") == 0 ? g_posix_execv : g_posix_execve;
  if (own != nullptr) return PyObject_Call(own, args, nullptr);
  PyObject* posix = PyImport_ImportModule("posix");
  PyObject* fn = posix ? PyObject_GetAttrString(posix, name) : nullptr;
  Py_XDECREF(posix);
  PyObject* result = fn ? PyObject_Call(fn, args, nullptr) : nullptr;
  Py_XDECREF(fn);
  return result;
}

// posix.execv's failure names no file (posix.execve's does): an execv that went through
// posix.execve raises what posix.execv would have.
void as_execv_error() {
  if (!PyErr_ExceptionMatches(PyExc_OSError)) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  PyObject* number = value ? PyObject_GetAttrString(value, "errno") : nullptr;
  long e = number && PyLong_Check(number) ? PyLong_AsLong(number) : -1;
  Py_XDECREF(number);
  if (e <= 0 || PyErr_Occurred()) {
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return;
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  errno = int(e);
  PyErr_SetFromErrno(PyExc_OSError);
}

// An argv CPython's exec refuses before it runs anything: not a list or tuple, empty, or an
// empty first argument.
bool argv_refused(PyObject* argv) {
  if (!PyList_Check(argv) && !PyTuple_Check(argv)) return true;
  if (PySequence_Size(argv) <= 0) return true;
  PyObject* first = PySequence_GetItem(argv, 0);
  if (first == nullptr) {
    PyErr_Clear();
    return true;
  }
  bool empty = (PyUnicode_Check(first) && PyUnicode_GET_LENGTH(first) == 0) ||
               (PyBytes_Check(first) && PyBytes_GET_SIZE(first) == 0);
  Py_DECREF(first);
  return empty;
}

// posix.execve(path, argv, env) with env joined to the run (flushed first, as the preloaded
// exec wrappers do); what posix.execve raises, it raises. `args` are the caller's, for a call
// CPython refuses, which goes to `refuser` (posix.execv or posix.execve) as it came.
PyObject* exec_joined(PyObject* path, PyObject* argv, PyObject* env, const char* refuser,
                      PyObject* args) {
  if (argv_refused(argv)) return posix_call(refuser, args);
  std::vector<std::string> entries;
  if (!environment_entries(env, entries)) return posix_call(refuser, args);
  std::vector<std::string> joined;
  Py_BEGIN_ALLOW_THREADS joined = sonde::in_process_exec_env(entries);  // flushes
  Py_END_ALLOW_THREADS PyObject* dict = entries_dict(joined);
  if (dict == nullptr) return nullptr;
  PyObject* joined_args = PyTuple_Pack(3, path, argv, dict);
  Py_DECREF(dict);
  if (joined_args == nullptr) return nullptr;
  PyObject* result = posix_call("execve", joined_args);
  Py_DECREF(joined_args);
  if (result == nullptr && std::strcmp(refuser, "execv") == 0) as_execv_error();
  return result;
}

PyObject* execve(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kKeywords[] = {"path", "argv", "env", nullptr};  // os.execve's names
  PyObject *path, *argv, *env;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO:execve", const_cast<char**>(kKeywords), &path,
                                   &argv, &env)) {
    return nullptr;
  }
  PyObject* positional = PyTuple_Pack(3, path, argv, env);
  if (positional == nullptr) return nullptr;
  PyObject* result = exec_joined(path, argv, env, "execve", positional);
  Py_DECREF(positional);
  return result;
}

PyObject* execv(PyObject*, PyObject* args) {
  PyObject *path, *argv;
  if (!PyArg_ParseTuple(args, "OO:execv", &path, &argv)) return nullptr;
  PyObject* os = PyImport_ImportModule("os");
  PyObject* environ = os ? PyObject_GetAttrString(os, "environ") : nullptr;
  Py_XDECREF(os);
  if (environ == nullptr) return nullptr;
  PyObject* result = exec_joined(path, argv, environ, "execv", args);
  Py_DECREF(environ);
  return result;
}

// _signal.signal, then sonde's handler back under the one it installed (in-process launch).
PyObject* g_real_signal = nullptr;

PyObject* signal_set(PyObject*, PyObject* args) {
  if (g_real_signal == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "sonde: _signal.signal was not taken over");
    return nullptr;
  }
  PyObject* result = PyObject_Call(g_real_signal, args, nullptr);
  if (result == nullptr) return nullptr;
  long sig = PyTuple_GET_SIZE(args) > 0 ? PyLong_AsLong(PyTuple_GET_ITEM(args, 0)) : -1;
  if (sig == -1 && PyErr_Occurred()) PyErr_Clear();  // _signal.signal took it: an int
  if (sig > 0) sonde::in_process_signal_set(int(sig));
  return result;
}

// Replaces _signal.signal (which signal.signal calls) with signal_set; once.
PyObject* take_signal(PyObject* self, PyObject*) {
  if (g_real_signal != nullptr) Py_RETURN_NONE;
  PyObject* module = PyImport_ImportModule("_signal");
  if (module == nullptr) return nullptr;
  g_real_signal = PyObject_GetAttrString(module, "signal");
  static PyMethodDef def = {"signal", signal_set, METH_VARARGS,
                            "_signal.signal, with sonde's handler kept underneath."};
  PyObject* fn = g_real_signal ? PyCFunction_New(&def, self) : nullptr;
  int rc = fn ? PyObject_SetAttrString(module, "signal", fn) : -1;
  Py_XDECREF(fn);
  Py_DECREF(module);
  if (rc < 0) return nullptr;
  Py_RETURN_NONE;
}

PyObject* run_env(PyObject*, PyObject*) { return string_list(sonde::in_process_run_env()); }

// CPython ends a run whose KeyboardInterrupt went uncaught by dying of SIGINT once finalized.
// The launcher catches it (to print it without its own frames), so it dies here: a C exit
// function runs after the finalization, as CPython's own death does, and atexit._clear()
// (which a program may call) cannot take it away.
bool g_die_of_sigint = false;

void die_of_sigint() {
  if (!g_die_of_sigint) return;
  std::fflush(nullptr);
  // SIG_DFL through sonde (its sigaction wrapper, or in-process adopted below): sonde's
  // handler stays underneath and flushes this death as any SIGINT's.
  if (std::signal(SIGINT, SIG_DFL) != SIG_ERR) {
    sonde::in_process_signal_set(SIGINT);
    kill(getpid(), SIGINT);
  }
  std::exit(130);  // CPython's status where the signal did not end it (blocked); flushed at exit
}

PyObject* die_of_sigint_at_exit(PyObject*, PyObject*) {
  if (!g_die_of_sigint && Py_AtExit(die_of_sigint) != 0) {
    PyErr_SetString(PyExc_RuntimeError, "sonde: no room for another exit function");
    return nullptr;
  }
  g_die_of_sigint = true;
  Py_RETURN_NONE;
}

// A list of 'NAME=value' bytes (what subprocess gives _posixsubprocess.fork_exec) joined to the
// run for a new process; nullptr, with no exception, where an entry is not bytes or holds a NUL
// (fork_exec then sees the list as it came and raises: a joined copy, cut at the NUL, would run;
// CPython's test_subprocess caught it).
PyObject* spawn_env_list(PyObject* list) {
  std::vector<std::string> entries;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); ++i) {
    PyObject* o = PyList_GET_ITEM(list, i);
    if (!PyBytes_Check(o)) return nullptr;
    std::string_view entry(PyBytes_AS_STRING(o), size_t(PyBytes_GET_SIZE(o)));
    if (entry.find('\0') != std::string_view::npos) return nullptr;
    entries.emplace_back(entry);
  }
  std::vector<std::string> out = sonde::in_process_spawn_env(entries);
  PyObject* joined = PyList_New(Py_ssize_t(out.size()));
  for (size_t i = 0; joined != nullptr && i < out.size(); ++i) {
    PyObject* b = PyBytes_FromStringAndSize(out[i].data(), Py_ssize_t(out[i].size()));
    if (b == nullptr) {
      Py_CLEAR(joined);
      break;
    }
    PyList_SET_ITEM(joined, Py_ssize_t(i), b);
  }
  if (joined == nullptr) PyErr_Clear();
  return joined;
}

// A mapping (os.posix_spawn's env) joined to the run for a new process, as a dict; nullptr,
// with no exception, where posix_spawn would refuse it (it then sees it as it came).
PyObject* spawn_env_dict(PyObject* mapping) {
  std::vector<std::string> entries;
  if (!environment_entries(mapping, entries)) return nullptr;
  PyObject* dict = entries_dict(sonde::in_process_spawn_env(entries));
  if (dict == nullptr) PyErr_Clear();
  return dict;
}

// CPython's own functions that start a process with an environment of the caller's, taken by
// take_os: subprocess's (_posixsubprocess.fork_exec, which execs in C past sonde) and
// os.posix_spawn/posix_spawnp (glibc's, past sonde's posix_spawn wrapper in-process).
PyObject* g_fork_exec = nullptr;
PyObject* g_posix_spawn = nullptr;
PyObject* g_posix_spawnp = nullptr;

// fork_exec(args, executable_list, close_fds, pass_fds, cwd, env, ...): env (index 5, 3.10 to
// 3.13) joined to the run where it is a list; None inherits os.environ's, which has the run.
PyObject* fork_exec(PyObject*, PyObject* args) {
  constexpr Py_ssize_t kEnv = 5;
  PyObject* call = args;
  Py_INCREF(call);
  if (PyTuple_GET_SIZE(args) > kEnv && PyList_Check(PyTuple_GET_ITEM(args, kEnv))) {
    if (PyObject* joined = spawn_env_list(PyTuple_GET_ITEM(args, kEnv))) {
      PyObject* copy = PyTuple_GetSlice(args, 0, PyTuple_GET_SIZE(args));
      if (copy != nullptr) {
        PyObject* given = PyTuple_GET_ITEM(copy, kEnv);
        PyTuple_SET_ITEM(copy, kEnv, joined);
        Py_DECREF(given);
        Py_SETREF(call, copy);
      } else {
        Py_DECREF(joined);
        PyErr_Clear();
      }
    }
  }
  PyObject* result = PyObject_Call(g_fork_exec, call, nullptr);
  Py_DECREF(call);
  return result;
}

// posix_spawn(path, argv, env, /, *, ...) and posix_spawnp: env (positional only) joined.
PyObject* spawn_joined(PyObject* own, PyObject* args, PyObject* kwargs) {
  PyObject* call = PyTuple_GetSlice(args, 0, PyTuple_GET_SIZE(args));
  if (call == nullptr) return nullptr;
  if (PyTuple_GET_SIZE(call) > 2) {
    if (PyObject* joined = spawn_env_dict(PyTuple_GET_ITEM(call, 2))) {
      PyObject* given = PyTuple_GET_ITEM(call, 2);
      PyTuple_SET_ITEM(call, 2, joined);
      Py_DECREF(given);
    }
  }
  PyObject* result = PyObject_Call(own, call, kwargs);
  Py_DECREF(call);
  return result;
}

PyObject* posix_spawn(PyObject*, PyObject* args, PyObject* kwargs) {
  return spawn_joined(g_posix_spawn, args, kwargs);
}

PyObject* posix_spawnp(PyObject*, PyObject* args, PyObject* kwargs) {
  return spawn_joined(g_posix_spawnp, args, kwargs);
}

// Puts `name` of this module in place of module.name, keeping the original in `*own`.
bool take_function(PyObject* self, const char* module_name, const char* name, PyObject** own) {
  PyObject* module = PyImport_ImportModule(module_name);
  PyObject* original = module ? PyObject_GetAttrString(module, name) : nullptr;
  PyObject* ours = original ? PyObject_GetAttrString(self, name) : nullptr;
  bool ok = ours != nullptr && PyObject_SetAttrString(module, name, ours) == 0;
  if (ok) {
    *own = original;
  } else {
    Py_XDECREF(original);
  }
  Py_XDECREF(ours);
  Py_XDECREF(module);
  return ok;
}

// sonde's _exit, execv and execve in place of CPython's, in posix and os alike (os took
// posix's at import: `os._exit is posix._exit` stays true), and in os.supports_fd (execve takes
// a descriptor); CPython's kept for posix_call. Once.
PyObject* take_os(PyObject* self, PyObject*) {
  if (g_posix_execve != nullptr) Py_RETURN_NONE;
  PyObject* posix = PyImport_ImportModule("posix");
  PyObject* os = posix ? PyImport_ImportModule("os") : nullptr;
  bool ok = os != nullptr;
  PyObject* execv_own = ok ? PyObject_GetAttrString(posix, "execv") : nullptr;
  PyObject* execve_own = execv_own ? PyObject_GetAttrString(posix, "execve") : nullptr;
  ok = execve_own != nullptr;
  for (const char* name : {"_exit", "execv", "execve"}) {
    PyObject* ours = ok ? PyObject_GetAttrString(self, name) : nullptr;
    ok = ours != nullptr && PyObject_SetAttrString(posix, name, ours) == 0 &&
         PyObject_SetAttrString(os, name, ours) == 0;
    Py_XDECREF(ours);
  }
  PyObject* fd_set = ok ? PyObject_GetAttrString(os, "supports_fd") : nullptr;
  if (fd_set != nullptr && PySet_Check(fd_set) && PySet_Contains(fd_set, execve_own) == 1) {
    PyObject* ours = PyObject_GetAttrString(self, "execve");
    ok = ours != nullptr && PySet_Discard(fd_set, execve_own) >= 0 && PySet_Add(fd_set, ours) == 0;
    Py_XDECREF(ours);
  }
  Py_XDECREF(fd_set);
  Py_XDECREF(os);
  Py_XDECREF(posix);
  if (!ok) {
    Py_XDECREF(execv_own);
    Py_XDECREF(execve_own);
    if (!PyErr_Occurred()) {
      PyErr_SetString(PyExc_RuntimeError, "sonde: posix's _exit and exec were not taken over");
    }
    return nullptr;
  }
  g_posix_execv = execv_own;
  g_posix_execve = execve_own;
  // The process starters, where this CPython has them (a module without one keeps its own).
  // subprocess took fork_exec as _fork_exec at its import, if that came first.
  if (take_function(self, "_posixsubprocess", "fork_exec", &g_fork_exec)) {
    PyObject* modules = PyImport_GetModuleDict();
    PyObject* subprocess = PyDict_GetItemString(modules, "subprocess");  // borrowed
    PyObject* taken = subprocess ? PyObject_GetAttrString(subprocess, "_fork_exec") : nullptr;
    if (taken == g_fork_exec) {
      PyObject* fn = PyObject_GetAttrString(self, "fork_exec");
      if (fn == nullptr || PyObject_SetAttrString(subprocess, "_fork_exec", fn) < 0) PyErr_Clear();
      Py_XDECREF(fn);
    }
    Py_XDECREF(taken);
  }
  PyErr_Clear();
  for (auto [name, own] :
       {std::pair{"posix_spawn", &g_posix_spawn}, std::pair{"posix_spawnp", &g_posix_spawnp}}) {
    if (!take_function(self, "posix", name, own)) {
      PyErr_Clear();
      continue;
    }
    PyObject* os_module = PyImport_ImportModule("os");
    PyObject* fn = PyObject_GetAttrString(self, name);
    if (os_module == nullptr || fn == nullptr || PyObject_SetAttrString(os_module, name, fn) < 0)
      PyErr_Clear();
    Py_XDECREF(fn);
    Py_XDECREF(os_module);
  }
  Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"start", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(start)),
     METH_VARARGS | METH_KEYWORDS,
     "start(*, skip_calls=0, lines=(), builtins=False, skip_exec=False, imports=False): record\n"
     "Python frames of every thread into sonde's stacks. builtins=False: Python frames only, "
     "through the\n"
     "frame-evaluation hook where EVAL_FRAME is True, sys.monitoring where MONITORING is True,\n"
     "else as builtins=True; builtins=True: C functions too, through sys.monitoring where\n"
     "MONITORING is True, else CPython's profile function. The next skip_calls calls on this\n"
     "thread that the chosen hook sees (the launcher's own) are not recorded, plus one with\n"
     "skip_exec where the hook sees C functions (the launcher's exec); functions matching a\n"
     "pattern in lines (fnmatch) get per-line times. imports=False: each import is one <import>\n"
     "frame, what it runs folded into it; True: module bodies recorded beneath it. Returns the\n"
     "hook used: 'eval_frame',\n"
     "'monitoring' or 'profile'; None in a sub-interpreter, which is not recorded, and where\n"
     "libsonde is not recording this process (it said why)."},
    {"stop", stop, METH_NOARGS, "Stop recording Python frames."},
    {"flush", flush, METH_NOARGS,
     "Write what was measured so far to the profile; True on success."},
    {"active", active, METH_NOARGS, "True when libsonde is loaded and recording."},
    {"record_facts", record_facts, METH_NOARGS,
     "Record what only Python can tell (torch's thread count) for the next flush, without one."},
    {"in_process", in_process, METH_O,
     "in_process(shown): note that the launcher loaded libsonde into this interpreter; at exit\n"
     "the profile's name (shown) is said after the final flush. False if sonde is not recording."},
    {"startup_ends", startup_ends, METH_NOARGS,
     "The interpreter's start-up ends: recorded as a call since the thread began."},
    {"teardown_begins", teardown_begins, METH_NOARGS,
     "The interpreter's teardown begins: recorded as a call open until the final flush."},
    {"exit_begins", exit_begins, METH_NOARGS,
     "The program's exit begins: no periodic flush from here on (in-process launch)."},
    {"_exit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(exit_now)),
     METH_VARARGS | METH_KEYWORDS,
     "os._exit(status) after the final flush (in-process launch: CPython's calls libc's)."},
    {"execv", execv, METH_VARARGS,
     "os.execv(path, argv) with os.environ joined to the run, after a flush (in-process launch)."},
    {"execve", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(execve)),
     METH_VARARGS | METH_KEYWORDS,
     "os.execve(path, argv, env) with env joined to the run, after a flush (in-process launch)."},
    {"take_signal", take_signal, METH_NOARGS,
     "Route _signal.signal through sonde, which keeps its handler under the program's "
     "(in-process launch)."},
    {"take_os", take_os, METH_NOARGS,
     "Put _exit, execv, execve, posix_spawn and posix_spawnp in place of CPython's in posix and\n"
     "os, and fork_exec in _posixsubprocess (in-process launch)."},
    {"fork_exec", fork_exec, METH_VARARGS,
     "_posixsubprocess.fork_exec with its environment list joined to the run (in-process)."},
    {"posix_spawn", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(posix_spawn)),
     METH_VARARGS | METH_KEYWORDS,
     "os.posix_spawn with its env joined to the run (in-process launch)."},
    {"posix_spawnp", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(posix_spawnp)),
     METH_VARARGS | METH_KEYWORDS,
     "os.posix_spawnp with its env joined to the run (in-process launch)."},
    {"die_of_sigint_at_exit", die_of_sigint_at_exit, METH_NOARGS,
     "Die of SIGINT once the interpreter is finalized, as CPython does after an uncaught\n"
     "KeyboardInterrupt (the launcher caught it to print it)."},
    {"run_env", run_env, METH_NOARGS,
     "['NAME=value', ...] of SONDE_RUN_ID, SONDE_OUTPUT and SONDE_PROCESS as sonde set them."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "_sonde",
                       "sonde's CPython hook (see the sonde package).",
                       -1,
                       kMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__sonde() {
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  // True where start() records through the frame-evaluation hook (3.10, 3.11) or sys.monitoring
  // (3.12+) by default.
  if (PyModule_AddObject(m, "EVAL_FRAME", PyBool_FromLong(sonde::python::eval_frame_available())) <
          0 ||
      PyModule_AddObject(m, "MONITORING", PyBool_FromLong(sonde::python::monitoring_available())) <
          0 ||
      !sonde::python::add_region_types(m)) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
