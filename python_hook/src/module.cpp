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
#include <vector>

#include "code_table.hpp"
#include "eval_frame.hpp"
#include "frames.hpp"
#include "greenlets.hpp"
#include "monitoring.hpp"
#include "out_of_memory.hpp"
#include "regions.hpp"
#include "setup_calls.hpp"
#include "sonde/in_process.hpp"
#include "sonde/probe.hpp"
#include "sonde/routine_kinds.hpp"
#include "sonde/sonde.h"

namespace {

// Which hook records the frames. By default the cheapest this build has: the frame-evaluation
// hook on 3.10 and 3.11, sys.monitoring on 3.12+ (Python frames only). With builtins (C functions
// too): sys.monitoring on 3.12+, else CPython's profile function, which is also the fallback when
// another tool holds sonde's sys.monitoring tool id.
enum class Hook { kNone, kEvalFrame, kMonitoring, kProfile };
Hook g_hook = Hook::kNone;

// A str the launcher passes on as the file system gives it (an output's or a library's path):
// its bytes, with a name that is not UTF-8 given back as its own bytes (os.fsencode's
// surrogateescape), where PyUnicode_AsUTF8 raised and the launcher died with a traceback.
// False with the exception set where `s` is not a str.
bool fs_bytes(PyObject* s, std::string& out) {
  PyObject* bytes = PyUnicode_EncodeFSDefault(s);
  if (bytes == nullptr) return false;
  out.assign(PyBytes_AS_STRING(bytes), size_t(PyBytes_GET_SIZE(bytes)));
  Py_DECREF(bytes);
  return true;
}

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
            "yappi, sys.setprofile) took the place of sonde's on a thread: from then "
            "on that thread's Python frames were not recorded (its native calls were, "
            "under the last frame recorded), also after the program removed its own "
            "(sys.setprofile(None), a profiler's disable()), unless it set back the one "
            "sys.getprofile() had given it. The default mode, without --builtins, "
            "records beside such profilers");
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
      std::string p;
      if (!fs_bytes(PySequence_Fast_GET_ITEM(seq, i), p)) {
        Py_DECREF(seq);
        return nullptr;
      }
      patterns.push_back(std::move(p));
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
  // Before the hook: the os module's lookups here are sonde's, not the program's. Done already
  // where libsonde was preloaded; where it could not be, the program forks as before.
  sonde::guard_python_fork();
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
  // Its version, for advice that holds from one on (torch.compile: PyTorch 2).
  PyObject* version = PyObject_GetAttrString(torch, "__version__");
  const char* text = version && PyUnicode_Check(version) ? PyUnicode_AsUTF8(version) : nullptr;
  if (text != nullptr && std::strlen(text) < 64) sonde::set_run_fact("torch.version", text);
  Py_XDECREF(version);
  PyErr_Clear();
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

// The in-process launch (sonde/in_process.hpp).
PyObject* in_process(PyObject*, PyObject* arg) {
  std::string shown;
  if (!fs_bytes(arg, shown)) return nullptr;
  return PyBool_FromLong(sonde::in_process_begin(shown.c_str()));
}

// python3 -m sonde started the program again under sonde run, in this interpreter: `why` the
// default in-process launch could not be used, or None where the user asked for the re-exec.
PyObject* launched_again(PyObject*, PyObject* why) {
  sonde::set_run_fact("sonde.launch", "re-exec");
  if (why != Py_None) {
    std::string text;
    if (!fs_bytes(why, text)) return nullptr;
    std::string note =
        "python3 -m sonde started the program again under sonde run, not "
        "in-process: ";
    note += text;
    sonde::add_run_note("launch", note.c_str(), false);
  }
  Py_RETURN_NONE;
}

// The status the launcher saw the program end with (sonde._exit_status, __main__.py); -1 where
// it was not set.
int launcher_status() {
  int status = -1;
  if (PyObject* sonde_module = PyImport_AddModule("sonde")) {  // borrowed
    if (PyObject* v = PyObject_GetAttrString(sonde_module, "_exit_status")) {
      if (PyLong_Check(v)) status = static_cast<int>(PyLong_AsLong(v));
      Py_DECREF(v);
    }
  }
  PyErr_Clear();
  return status;
}

PyObject* exit_begins(PyObject*, PyObject*) {
  int status = launcher_status();
  Py_BEGIN_ALLOW_THREADS sonde::in_process_exit_begins(status);  // may wait for a periodic flush
  Py_END_ALLOW_THREADS Py_RETURN_NONE;
}

// CPython 3.10 frees the interpreter while a daemon thread may still wake in take_gil and read
// it, a race of its own that sonde's exit flush after the finalization widened into a crash at
// exit (libprof's Runtime::flush_before_teardown has the figures). There, with other thread
// states left at the last atexit call (daemons: the others were joined before atexit), the
// final flush is made here instead. 3.11 on did not crash.
PyObject* flush_before_teardown(PyObject*, PyObject*) {
#if PY_VERSION_HEX < 0x030B0000
  PyThreadState* me = PyThreadState_Get();
  bool others = false;
  for (PyThreadState* t = PyInterpreterState_ThreadHead(PyThreadState_GetInterpreter(me));
       t != nullptr && !others; t = PyThreadState_Next(t))
    others = t != me;
  if (others) {
    int status = launcher_status();
    Py_BEGIN_ALLOW_THREADS sonde::in_process_flush_before_teardown(status);
    Py_END_ALLOW_THREADS
  }
#endif
  Py_RETURN_NONE;
}

// The interpreter's start-up and teardown, named in the main thread's tree where they were
// the root's own time (88 % of `python3 -m sonde -c "import json"`, unnamed): start-up from
// the thread's start (libsonde's, before Py_Initialize) to the hook's, teardown from the
// launcher's last atexit call (after the hook has stopped) to the final flush. Registered here,
// where the hook's other names are: kind python, as <import>.
PyObject* startup_ends(PyObject*, PyObject*) {
  static sonde::RoutineId id =
      sonde::register_routine({"<interpreter start-up>", sonde::kinds::kPython, "", "", 0});
  sonde::probe_since_thread_start(id);
  Py_RETURN_NONE;
}

PyObject* teardown_begins(PyObject*, PyObject*) {
  static sonde::RoutineId id =
      sonde::register_routine({"<interpreter teardown>", sonde::kinds::kPython, "", "", 0});
  sonde::probe_open_until_exit(id);
  Py_RETURN_NONE;
}

// multiprocessing's resource tracker and forkserver end at EOF on a pipe this process holds,
// which the kernel closes as it exits, after the final flush: theirs came after the command had
// returned (process/exit_helpers.hpp). Named to libsonde at the interpreter's last atexit call,
// after the program's exit functions; a C function, so that no hook records it. The attributes
// are CPython's own, 3.8 to 3.13: (module, its singleton, the write end, the helper's pid).
int int_attr(PyObject* owner, const char* name) {
  PyObject* v = PyObject_GetAttrString(owner, name);
  long n = v != nullptr && PyLong_Check(v) ? PyLong_AsLong(v) : -1;
  Py_XDECREF(v);
  PyErr_Clear();
  return n >= 0 && n <= INT_MAX ? int(n) : -1;
}

PyObject* name_helpers(PyObject*, PyObject*) {
  static const char* const kHelpers[][4] = {
      {"multiprocessing.resource_tracker", "_resource_tracker", "_fd", "_pid"},
      {"multiprocessing.forkserver", "_forkserver", "_forkserver_alive_fd", "_forkserver_pid"}};
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  for (const auto& h : kHelpers) {
    PyObject* module = modules != nullptr ? PyDict_GetItemString(modules, h[0]) : nullptr;
    PyObject* owner = module != nullptr ? PyObject_GetAttrString(module, h[1]) : nullptr;
    PyErr_Clear();
    if (owner == nullptr) continue;
    int fd = int_attr(owner, h[2]), pid = int_attr(owner, h[3]);
    Py_DECREF(owner);
    if (fd >= 0 && pid > 0) sonde::end_helper_at_exit(fd, pid);
  }
  Py_RETURN_NONE;
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

PyObject* run_env(PyObject*, PyObject*) { return string_list(sonde::in_process_run_env()); }

PyObject* preload_path(PyObject*, PyObject*) {
  std::string path = sonde::in_process_preload();
  return PyUnicode_DecodeFSDefaultAndSize(path.data(), Py_ssize_t(path.size()));
}

// CPython ends a run whose KeyboardInterrupt went uncaught by dying of SIGINT once finalized.
// The launcher catches it (to print it without its own frames), so it dies here: a C exit
// function runs after the finalization, as CPython's own death does, and atexit._clear()
// (which a program may call) cannot take it away.
bool g_die_of_sigint = false;

void die_of_sigint() {
  if (!g_die_of_sigint) return;
  std::fflush(nullptr);
  // SIG_DFL through sonde (its signal wrapper, preloaded or rebound in-process; adopted below
  // where this extension could not be rebound): sonde's handler stays underneath and flushes
  // this death as any SIGINT's.
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

PyMethodDef kMethods[] = {
    {"start",
     reinterpret_cast<PyCFunction>(
         reinterpret_cast<void (*)()>(sonde::python::no_throw<start, PyObject*, PyObject*>)),
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
    {"stop", sonde::python::guarded<stop>, METH_NOARGS, "Stop recording Python frames."},
    {"flush", sonde::python::guarded<flush>, METH_NOARGS,
     "Write what was measured so far to the profile; True on success."},
    {"active", sonde::python::guarded<active>, METH_NOARGS,
     "True when libsonde is loaded and recording."},
    {"record_facts", sonde::python::guarded<record_facts>, METH_NOARGS,
     "Record what only Python can tell (torch's thread count) for the next flush, without one."},
    {"in_process", sonde::python::guarded<in_process>, METH_O,
     "in_process(shown): note that the launcher loaded libsonde into this interpreter; at exit\n"
     "the profile's name (shown) is said after the final flush. False if sonde is not recording."},
    {"launched_again", sonde::python::guarded<launched_again>, METH_O,
     "launched_again(why): the launcher started this interpreter under sonde run; why (a\n"
     "sentence, or None where asked for) the in-process launch was not used, as a note."},
    {"startup_ends", sonde::python::guarded<startup_ends>, METH_NOARGS,
     "The interpreter's start-up ends: recorded as a call since the thread began."},
    {"teardown_begins", sonde::python::guarded<teardown_begins>, METH_NOARGS,
     "The interpreter's teardown begins: recorded as a call open until the final flush."},
    {"exit_begins", sonde::python::guarded<exit_begins>, METH_NOARGS,
     "The program's exit begins: no periodic flush from here on (in-process launch)."},
    {"flush_before_teardown", sonde::python::guarded<flush_before_teardown>, METH_NOARGS,
     "CPython 3.10 with daemon threads left: the final flush now, before the interpreter's\n"
     "teardown, where a daemon may read the freed interpreter. For the last atexit call."},
    {"die_of_sigint_at_exit", sonde::python::guarded<die_of_sigint_at_exit>, METH_NOARGS,
     "Die of SIGINT once the interpreter is finalized, as CPython does after an uncaught\n"
     "KeyboardInterrupt (the launcher caught it to print it)."},
    {"name_helpers", sonde::python::guarded<name_helpers>, METH_NOARGS,
     "Name multiprocessing's resource tracker and forkserver, if running, to libsonde: their\n"
     "pipe ends are closed after the final flush, and they are waited for, so that their own\n"
     "flushes are in the profile when the command returns. For the last atexit call."},
    {"preload_path", sonde::python::guarded<preload_path>, METH_NOARGS,
     "libsonde's path as LD_PRELOAD can carry it (a link where the real one holds a space or a\n"
     "colon); '' where sonde is not recording."},
    {"run_env", sonde::python::guarded<run_env>, METH_NOARGS,
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

namespace {

// The calling thread's innermost Python frame (libsonde's interpreter_frame): read from this
// thread's own state, which only this thread changes, with or without the GIL; nothing
// allocated (PyEval_GetFrame would make a frame object on 3.11+). A thread Python never ran on
// has none.
const void* current_interpreter_frame() {
  PyThreadState* ts = PyGILState_GetThisThreadState();
  if (ts == nullptr) return nullptr;
#if PY_VERSION_HEX >= 0x030D0000
  return ts->current_frame;
#elif PY_VERSION_HEX >= 0x030B0000
  return ts->cframe != nullptr ? ts->cframe->current_frame : nullptr;
#else
  return ts->frame;
#endif
}

}  // namespace

PyMODINIT_FUNC PyInit__sonde() {
  PyObject* m = PyModule_Create(&kModule);
  if (m == nullptr) return nullptr;
  sonde::set_interpreter_frame_fn(&current_interpreter_frame);
  // True where start() records through the frame-evaluation hook (3.10, 3.11) or sys.monitoring
  // (3.12+) by default.
  if (PyModule_AddObject(m, "EVAL_FRAME", PyBool_FromLong(sonde::python::eval_frame_available())) <
          0 ||
      PyModule_AddObject(m, "MONITORING", PyBool_FromLong(sonde::python::monitoring_available())) <
          0 ||
      !sonde::python::add_region_types(m) || !sonde::python::add_setup_call(m)) {
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
