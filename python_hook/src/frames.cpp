#include "frames.hpp"

#include <fnmatch.h>
#include <frameobject.h>
#include <opcode.h>
#include <structmember.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "code_table.hpp"
#include "cpython_compat.hpp"
#include "greenlets.hpp"
#include "out_of_memory.hpp"
#include "per_thread.hpp"
#include "sonde/probe.hpp"
#include "sonde/routine_kinds.hpp"
#include "sonde/source_fingerprint.hpp"
#include "statements.hpp"

namespace sonde::python {

namespace {

// Sets a C profile or trace function (nullptr: none) on every thread of this interpreter.
#if PY_VERSION_HEX >= 0x030C0000
bool set_profile_all(Py_tracefunc f) {
  PyEval_SetProfileAllThreads(f, nullptr);
  return !PyErr_Occurred();
}
bool set_trace_all(Py_tracefunc f) {
  PyEval_SetTraceAllThreads(f, nullptr);
  return !PyErr_Occurred();
}
#else
PyObject* new_witness();
bool g_sonde_sets = false;  // sonde itself sets or clears the profile functions: no witness counts

// `witnessed`: each thread's profile function gets a witness of its own (below).
template <int (*Set)(PyThreadState*, Py_tracefunc, PyObject*)>
bool set_all(Py_tracefunc f, bool witnessed = false) {
  PyInterpreterState* interp = PyThreadState_GetInterpreter(PyThreadState_Get());
  bool ok = true;
  g_sonde_sets = true;
  for (PyThreadState* t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
    PyObject* witness = witnessed ? new_witness() : nullptr;
    ok = Set(t, f, witness) == 0 && ok;
    Py_XDECREF(witness);
  }
  g_sonde_sets = false;
  return ok;
}
bool set_profile_all(Py_tracefunc f) { return set_all<_PyEval_SetProfile>(f, f != nullptr); }
bool set_trace_all(Py_tracefunc f) { return set_all<_PyEval_SetTrace>(f); }
#endif

// The profile function's frames of one thread, and the calls still to skip on it.
struct ProfileFrames {
  std::vector<OpenedFrame> open;
  int skip = 0;
};
ProfileFrames& here() { return PerThread<ProfileFrames>::get(); }  // one instruction

// C functions are recorded too (`--builtins`); else the profile function stands in for the
// frame-evaluation hook and passes over their events.
bool g_builtins = true;

std::string base_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string utf8(PyObject* s) {
  if (s == nullptr || !PyUnicode_Check(s)) return "?";
  if (const char* c = PyUnicode_AsUTF8(s)) return c;
  PyErr_Clear();
  // A path that is not UTF-8 (CPython decodes it with surrogateescape): its own bytes, as the
  // run's command line keeps them, and as the renderers escape them. "?" had made every
  // function of two such files one routine. Any other lone surrogate is written \udcXX.
  PyObject* bytes = PyUnicode_AsEncodedString(s, "utf-8", "surrogateescape");
  if (bytes == nullptr) {
    PyErr_Clear();
    bytes = PyUnicode_AsEncodedString(s, "utf-8", "backslashreplace");
  }
  if (bytes == nullptr) {
    PyErr_Clear();
    return "?";
  }
  std::string out(PyBytes_AS_STRING(bytes), size_t(PyBytes_GET_SIZE(bytes)));
  Py_DECREF(bytes);
  return out;
}

// Functions whose lines are timed (`--lines`): fnmatch patterns on the name or qualified name,
// and which of them matched a function that ran (each said at stop when it matched none).
std::vector<std::string> g_line_patterns;
std::vector<bool> g_line_pattern_matched;

struct CodeInfo {
  RoutineId id;
  bool lines;
  bool machinery;
};

// importlib's own frames (`<frozen importlib._bootstrap>`, `..._external`): an import runs some
// 30 of them (finders, locks, path joins, stats), and every import makes a new path of each, so
// they were most of a framework import's call paths (import torch: 51,619 of 51,650). They are
// folded into one routine, entered once per outermost entry into the machinery; the module bodies
// it runs, and what they call, are recorded beneath it as always.
// sonde's own finder (_frameworks.py, first on sys.meta_path) is asked about every import: it is
// machinery too, or each import would show a frame of sonde's package.
bool is_machinery(PyCodeObject* code) {
  static const char kPrefix[] = "<frozen importlib._bootstrap";
  static const char kFinder[] = "/sonde/_frameworks.py";
  PyObject* file = code->co_filename;
  if (file == nullptr || !PyUnicode_Check(file) || !PyUnicode_IS_ASCII(file)) return false;
  size_t n = size_t(PyUnicode_GET_LENGTH(file));
  const char* data = static_cast<const char*>(PyUnicode_DATA(file));
  return (n >= sizeof(kPrefix) - 1 && std::memcmp(data, kPrefix, sizeof(kPrefix) - 1) == 0) ||
         (n >= sizeof(kFinder) - 1 &&
          std::memcmp(data + n - (sizeof(kFinder) - 1), kFinder, sizeof(kFinder) - 1) == 0);
}

// Once per file whose lines are timed (under the GIL): readers show those lines' text only from
// a file with this fingerprint (sonde/source_fingerprint.hpp).
void fingerprint_source(const std::string& file) {
  static std::unordered_set<std::string> done;
  if (!done.insert(file).second) return;
  std::string fingerprint = source_fingerprint(file);
  if (!fingerprint.empty())
    set_run_fact((kSourceFingerprintKey + file).c_str(), fingerprint.c_str());
}

bool wants_lines(PyCodeObject* code) {
  if (g_line_patterns.empty()) return false;
  // 3.10's code objects have no qualified name: its patterns match the name alone.
  PyObject* qualified = code_qualname(code);
  std::string name = utf8(code->co_name), qualname = qualified ? utf8(qualified) : name;
  bool wanted = false;
  for (size_t i = 0; i < g_line_patterns.size(); ++i) {
    const std::string& p = g_line_patterns[i];
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0 || fnmatch(p.c_str(), qualname.c_str(), 0) == 0) {
      g_line_pattern_matched[i] = true;  // every pattern that matches, for the note at stop
      wanted = true;
    }
  }
  return wanted;
}

// The table holds (id + 1) << 2 | machinery << 1 | timed-lines, so 0 still means "not seen yet".
CodeInfo code_info(PyCodeObject* code) {
  if (uintptr_t v = code_table_find(code))
    return {RoutineId((v >> 2) - 1), (v & 1) != 0, (v & 2) != 0};
  if (is_machinery(code)) {
    CodeInfo info{import_routine(), false, true};
    code_table_insert(code, (uintptr_t(info.id) + 1) << 2 | 2);
    return info;
  }
  // pprof/cProfile style: file.py:LINE(function); the full path is kept in routines.file.
  std::string file = utf8(code->co_filename);
  std::string name = code_display_name(code);
  // A generator function is one call per generator object, however many times it is resumed:
  // marking it lets the breakdown take the generator feeding a loop as its data loading.
  const char* library =
      (code->co_flags & (CO_GENERATOR | CO_ASYNC_GENERATOR)) ? kinds::kGeneratorLibrary : "";
  CodeInfo info{
      register_routine({name.c_str(), kinds::kPython, library, file.c_str(), code->co_firstlineno}),
      wants_lines(code), false};
  code_table_insert(code, (uintptr_t(info.id) + 1) << 2 | info.lines);
  if (info.lines) fingerprint_source(file);
  return info;
}

// C functions have no code object: cached by method definition and the type it is bound to
// (none for a module function), the pair itself the key (ml * 31 + type, before, let two
// methods of types 31 method definitions apart share a name). A direct-mapped table of the
// recent pairs comes first: the map's lookup hashes and divides on every C call. The GIL
// guards both (the hooks run holding it).
RoutineId builtin_routine(PyMethodDef* ml, PyTypeObject* bound, PyObject* module) {
  struct Key {
    const PyMethodDef* ml;
    const PyTypeObject* bound;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.ml) * 31 + std::hash<const void*>()(k.bound);
    }
  };
  struct Recent {
    Key key;
    RoutineId id;
  };
  static Recent recent[256];  // zero-initialised: no guard on the way to a hit
  Key key{ml, bound};
  Recent& slot =
      recent[((reinterpret_cast<uintptr_t>(ml) >> 5) ^ (reinterpret_cast<uintptr_t>(bound) >> 4)) &
             255];
  if (slot.key == key) return slot.id;
  static std::unordered_map<Key, RoutineId, KeyHash> cache;  // its guard only past a miss
  if (auto it = cache.find(key); it != cache.end()) {
    slot = {key, it->second};
    return it->second;
  }
  std::string name;
  if (bound != nullptr) {
    name = std::string(bound->tp_name) + "." + ml->ml_name;
  } else if (module != nullptr && PyUnicode_Check(module)) {
    name = utf8(module) + "." + ml->ml_name;
  } else {
    name = ml->ml_name;
  }
  name = "<built-in " + name + ">";
  RoutineId id = register_routine({name.c_str(), kinds::kBuiltin, ""});
  cache.emplace(key, id);
  slot = {key, id};
  return id;
}

RoutineId cfunction_routine(PyObject* fn) {
  auto* c = reinterpret_cast<PyCFunctionObject*>(fn);
  PyObject* self = c->m_self;
  bool bound = self != nullptr && !PyModule_Check(self);
  return builtin_routine(c->m_ml, bound ? Py_TYPE(self) : nullptr, c->m_module);
}

bool in_machinery(const ProfileFrames& f) { return !f.open.empty() && f.open.back().machinery; }

void enter(ProfileFrames& f, RoutineId id, bool resumed = false, bool machinery = false) {
  // Grown before anything is entered (out_of_memory.hpp).
  if (f.open.size() == f.open.capacity()) f.open.reserve(f.open.empty() ? 64 : 2 * f.open.size());
  if (f.skip > 0) {
    --f.skip;
    f.open.push_back({nullptr, false});  // its return is balanced, and nothing is recorded
    return;
  }
  if (folded_into_import(in_machinery(f), machinery)) {
    f.open.push_back({nullptr, true});  // folded into the import the outermost one opened
    return;
  }
  ThreadState* t =
      resumed ? probe_resume(id, Nesting::kChildren) : probe_enter(id, Nesting::kChildren);
  f.open.push_back({t, machinery});
}

// A generator or coroutine frame is entered at every resumption; only its first entry is a
// call.
bool resumed(PyFrameObject* frame, PyCodeObject* code) {
  if ((code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) == 0) return false;
#if PY_VERSION_HEX >= 0x030B0000
  // The frame stands on a RESUME instruction whose argument says which: 0 is the start of the
  // code, anything else a return from yield, yield from or await.
  int lasti = PyFrame_GetLasti(frame);
  if (lasti < 0) return false;
#endif
#if PY_VERSION_HEX >= 0x030C0000
  // Not built or tested here (3.11 is): the quickened instructions are private from 3.12 on,
  // the plain bytes public (and cached). RESUME's low two bits say where it resumes.
  PyObject* bytes = PyCode_GetCode(code);
  if (bytes == nullptr) {
    PyErr_Clear();
    return false;
  }
  auto* b = reinterpret_cast<const unsigned char*>(PyBytes_AS_STRING(bytes));
  bool first_entry =
      lasti + 1 < PyBytes_GET_SIZE(bytes) && b[lasti] == RESUME && (b[lasti + 1] & 3) == 0;
  Py_DECREF(bytes);
#elif PY_VERSION_HEX >= 0x030B0000
  _Py_CODEUNIT unit = _PyCode_CODE(code)[lasti / int(sizeof(_Py_CODEUNIT))];
  int op = _Py_OPCODE(unit);
  // close() and throw() enter on the YIELD_VALUE they interrupt: a resumption too.
  bool first_entry = (op == RESUME || op == RESUME_QUICK) && _Py_OPARG(unit) == 0;
#else
  // 3.10: no instruction has run before the first entry (f_lasti -1); never_ran() takes back
  // the one that was a throw() or close() of a generator not yet started.
  bool first_entry = frame->f_lasti < 0;
#endif
  return !first_entry;
}

// A frame that returns without having run an instruction: on 3.10, a generator thrown into
// (closed, as 3.10 closes every generator dropped unstarted) before its first next(), which
// raises at once. Its body never ran: no call, as on 3.11+, where such a frame is not entered.
bool never_ran(PyFrameObject* frame) {
#if PY_VERSION_HEX >= 0x030B0000
  (void)frame;
  return false;
#else
  return frame->f_lasti < 0;
#endif
}

// `cancel`: the frame never ran (never_ran), its call is taken back.
void leave(ProfileFrames& f, bool cancel = false) {
  if (f.open.empty()) return;  // a frame that was running before the hook: never entered
  ThreadState* t = f.open.back().thread;
  bool import_ends = f.open.back().machinery && !(f.open.size() > 1 && f.open.end()[-2].machinery);
  f.open.pop_back();
  if (t != nullptr) {
    if (__builtin_expect(cancel, 0))
      probe_cancel(t);
    else
      probe_exit_frame(t);
  }
  if (import_ends && !greenlets_followed()) greenlets_import_ended();
}

int profile_of(PyFrameObject* frame, int what, PyObject* arg) {
  ProfileFrames& f = here();
  switch (what) {
    case PyTrace_CALL: {
      if (f.skip == 0 && in_machinery(f) && fold_imports()) {
        f.open.push_back({nullptr, true});  // inside an import folded whole: not looked up
        break;
      }
      PyCodeObject* code = PyFrame_GetCode(frame);
      CodeInfo info = code_info(code);
      enter(f, info.id, resumed(frame, code), info.machinery);
      Py_DECREF(code);
      break;
    }
    case PyTrace_RETURN:  // also on yield and on an exception leaving the frame
      leave(f, never_ran(frame));
      break;
    case PyTrace_C_CALL:
      if (!g_builtins) break;
      if (in_machinery(f)) {
        f.open.push_back({nullptr, true});  // the import machinery's C calls are folded too
      } else if (PyCFunction_Check(arg)) {
        enter(f, cfunction_routine(arg));
      } else {
        f.open.push_back({nullptr, false});  // keeps C_RETURN balanced
        f.skip -= f.skip > 0;
      }
      break;
    case PyTrace_C_RETURN:
    case PyTrace_C_EXCEPTION:
      if (g_builtins) leave(f);
      break;
    default:
      break;
  }
  return 0;
}

// A std::bad_alloc never crosses into CPython's C frames (out_of_memory.hpp).
int profile(PyObject*, PyFrameObject* frame, int what, PyObject* arg) {
  return or_starve(0, [&] { return profile_of(frame, what, arg); });
}

// Line timing, like line_profiler: a line runs from its line event to the next line event (or
// the return) of the same frame, calls it makes included. Only frames of matching functions
// keep a state; every other line event costs one comparison.
//
// A statement over several lines gets line events 4, 5, 4 (`x = f(a,\n b)`: the call after
// its last argument's line): one run of it is one hit on each of its lines, the time of every
// segment its line's, as line_profiler shows it. A run ends where a line of another statement
// comes, or the same line of a one-line statement again (a loop's backward jump): a loop's
// header is a hit a round. Statements are read once per function whose lines are timed.
void exclude_from_lines(uint64_t ticks);

// The parse is sonde's work, not the program's: its time is taken off the open frames and the
// timed lines (the first call of `Module.train` was charged 7 ms of parsing torch's module.py,
// and the line that called it with it).
const StatementStarts* statement_starts(PyCodeObject* code, RoutineId routine) {
  // Per function, by its routine (file, first line and name: no string made on each timed
  // call); its block alone is parsed where it can be (statements.hpp).
  static std::unordered_map<RoutineId, StatementStarts> functions;
  auto [it, added] = functions.try_emplace(routine);
  if (added) {
    uint64_t from = probe_now();
    it->second = read_statement_starts(utf8(code->co_filename), code->co_firstlineno);
    uint64_t took = probe_now() - from;
    exclude_from_open_frames(took);
    exclude_from_lines(took);
  }
  return &it->second;
}

struct LineState {
  PyFrameObject* frame;
  RoutineId routine;
  const StatementStarts* starts;
  int line = -1;
  uint64_t start = 0;
  int statement = -1;  // the first line of the statement running
  uint64_t seen = 0;   // its lines hit in this run, bit (line - statement)
  bool hit = true;     // the segment since `start` is a hit of its line

  // The line event at `next`.
  void enter(int next) {
    auto found = starts->find(next);
    int first = found == starts->end() ? next : found->second;
    uint64_t bit = next - first < 64 ? uint64_t{1} << (next - first) : 0;
    // The same line again is a loop's next round, unless a statement over several lines
    // holds the loop (3.12's inlined comprehensions).
    bool again = first == statement && (next != line || found != starts->end());
    hit = !again || bit == 0 || (seen & bit) == 0;
    seen = (again ? seen : 0) | bit;
    statement = first;
    line = next;
  }
};
thread_local std::vector<LineState> t_lines;

void exclude_from_lines(uint64_t ticks) {
  for (LineState& s : t_lines) s.start += ticks;
}

void finish_line(LineState& s, uint64_t now) {
  if (s.line >= 0) record_line(s.routine, s.line, now - s.start, s.hit ? 1 : 0);
}

int trace_of(PyFrameObject* frame, int what) {
  switch (what) {
    case PyTrace_CALL: {
      PyCodeObject* code = PyFrame_GetCode(frame);
      CodeInfo info = code_info(code);
      if (info.lines) t_lines.push_back({frame, info.id, statement_starts(code, info.id)});
      Py_DECREF(code);
      break;
    }
    case PyTrace_LINE:
      if (!t_lines.empty() && t_lines.back().frame == frame) {
        LineState& s = t_lines.back();
        uint64_t now = probe_now();
        finish_line(s, now);
        s.enter(PyFrame_GetLineNumber(frame));
        s.start = now;
      }
      break;
    case PyTrace_RETURN:
      if (!t_lines.empty() && t_lines.back().frame == frame) {
        finish_line(t_lines.back(), probe_now());
        t_lines.pop_back();
      }
      break;
    default:
      break;
  }
  return 0;
}

// Never an exception into CPython's C frames (out_of_memory.hpp).
int trace(PyObject*, PyFrameObject* frame, int what, PyObject*) {
  return or_starve(0, [&] { return trace_of(frame, what); });
}

#if PY_VERSION_HEX < 0x030C0000
// The object sonde's profile function is set with, one per thread. CPython drops its reference
// when the function is replaced (the new one already in place) or the thread ends (none in
// place, no frame running), so its end tells when a program took the slot: cProfile's
// enable(), yappi, sys.setprofile(f), or sys.setprofile(None) after `old = sys.getprofile()`
// read None. A thread that did so and ended before the program's exit was lost without a word
// (the check at stop sees only the threads then alive). And sys.getprofile() now returns it: a
// program that saves it and sets it back gives the thread sonde's function again, as a call
// of it (a Python-level profile function) puts that back.
struct Witness {
  PyObject_HEAD vectorcallfunc vectorcall;
};
bool g_profile_taken = false;  // under the GIL

void witness_dealloc(PyObject* self) {
  PyThreadState* t = _PyThreadState_UncheckedGet();
  if (!g_sonde_sets && t != nullptr && t->c_profilefunc != profile && runs_python_frame(t))
    g_profile_taken = true;
  PyTypeObject* type = Py_TYPE(self);
  PyObject_Free(self);
  Py_DECREF(type);
}

PyObject* witness_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject*);

PyMemberDef g_witness_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Witness, vectorcall), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr}};
PyType_Slot g_witness_slots[] = {{Py_tp_call, reinterpret_cast<void*>(PyVectorcall_Call)},
                                 {Py_tp_dealloc, reinterpret_cast<void*>(witness_dealloc)},
                                 {Py_tp_members, g_witness_members},
                                 {0, nullptr}};
PyType_Spec g_witness_spec = {"sonde._sonde.ProfileFunction", sizeof(Witness), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL, g_witness_slots};
PyObject* g_witness_type = nullptr;  // kept for the process's life

PyObject* new_witness() {
  if (g_witness_type == nullptr) g_witness_type = PyType_FromSpec(&g_witness_spec);
  if (g_witness_type == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  auto* w = PyObject_New(Witness, reinterpret_cast<PyTypeObject*>(g_witness_type));
  if (w == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  w->vectorcall = witness_call;
  return reinterpret_cast<PyObject*>(w);
}
#endif

// Sets Hook on this thread: the profile function with a witness of its own (3.11).
template <void (*Install)(Py_tracefunc, PyObject*), Py_tracefunc Hook>
void install_here() {
#if PY_VERSION_HEX < 0x030C0000
  if (Hook == profile) {
    PyObject* witness = new_witness();
    g_sonde_sets = true;
    Install(Hook, witness);
    g_sonde_sets = false;
    Py_XDECREF(witness);
    return;
  }
#endif
  Install(Hook, nullptr);
}

// threading.setprofile() / settrace() hand new threads this callable as a Python-level hook:
// its first call installs the C function on the thread (`Install` is PyEval_SetProfile or
// PyEval_SetTrace) and passes on the call event of the frame being entered.
template <void (*Install)(Py_tracefunc, PyObject*), Py_tracefunc Hook>
PyObject* bootstrap(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  install_here<Install, Hook>();
  if (nargs >= 2 && PyFrame_Check(args[0]) && PyUnicode_Check(args[1]) &&
      PyUnicode_CompareWithASCIIString(args[1], "call") == 0) {
    Hook(nullptr, reinterpret_cast<PyFrameObject*>(args[0]), PyTrace_CALL, Py_None);
  }
  Py_RETURN_NONE;
}

template <void (*Install)(Py_tracefunc, PyObject*), Py_tracefunc Hook>
PyMethodDef bootstrap_def(const char* name) {
  return {name,
          reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(bootstrap<Install, Hook>)),
          METH_FASTCALL, nullptr};
}

#if PY_VERSION_HEX < 0x030C0000
// Called as a Python-level profile function (the program set back what sys.getprofile() gave
// it): what threading's bootstrap does, sonde's function again and the call event passed on.
PyObject* witness_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject*) {
  Py_INCREF(self);  // replaced in the bootstrap, while this runs
  // Something took sonde's place before it was set back: what ran meanwhile went unrecorded.
  g_profile_taken = true;
  PyObject* result = bootstrap<PyEval_SetProfile, profile>(self, args, PyVectorcall_NARGS(nargsf));
  Py_DECREF(self);
  return result;
}
#endif

// PyCFunction_New keeps a pointer to its PyMethodDef: these must outlive every thread.
PyMethodDef g_bootstrap_def = bootstrap_def<PyEval_SetProfile, profile>("_sonde_thread_profile");
PyMethodDef g_bootstrap_trace_def = bootstrap_def<PyEval_SetTrace, trace>("_sonde_thread_trace");

bool set_threading_hook(const char* setter, PyObject* hook) {
  PyObject* threading = PyImport_ImportModule("threading");
  if (threading == nullptr) return false;
  PyObject* r = PyObject_CallMethod(threading, setter, "O", hook);
  Py_DECREF(threading);
  Py_XDECREF(r);
  return r != nullptr;
}

}  // namespace

RoutineId code_routine(PyCodeObject* code) { return code_info(code).id; }

RoutineId code_routine(PyCodeObject* code, bool* machinery) {
  CodeInfo info = code_info(code);
  *machinery = info.machinery;
  return info.id;
}

std::string code_display_name(PyCodeObject* code) {
  return base_name(utf8(code->co_filename)) + ":" + std::to_string(code->co_firstlineno) + "(" +
         utf8(code->co_name) + ")";
}

namespace {
bool g_fold_imports = true;
}  // namespace

void set_fold_imports(bool fold) { g_fold_imports = fold; }
bool fold_imports() { return g_fold_imports; }

RoutineId import_routine() {
  static RoutineId id =
      register_routine({"<import>", kinds::kPython, "", "<frozen importlib._bootstrap>", 0});
  return id;
}

bool c_callable_routine(PyObject* callable, PyObject* self_arg, RoutineId* id) {
  if (!is_c_callable(callable, self_arg)) return false;
  // `obj.method()` of a C type calls the unbound descriptor with obj as its first argument;
  // named after obj's type, as the bound method the profile function sees is.
  *id = PyCFunction_Check(callable)
            ? cfunction_routine(callable)
            : builtin_routine(reinterpret_cast<PyMethodDescrObject*>(callable)->d_method,
                              Py_TYPE(self_arg), nullptr);
  return true;
}

void skip_calls(int n) { here().skip = n; }

std::vector<OpenedFrame>& profile_hook_frames() { return here().open; }

namespace {
bool g_lines_on = false;  // between install_line_tracing and uninstall_line_tracing
}  // namespace

// Such threads timed no line: a red team's loop run on a _thread thread and on the main thread
// read 100 hits of 200, and one run there alone "no line costs" under --lines (every version).
void trace_lines_on_this_thread(bool started) {
  if (!g_lines_on || PyThreadState_Get()->c_tracefunc != nullptr) return;
  // PyEval_SetTrace raises the sys.settrace audit event; an audit hook refusing it is reported
  // as unraisable by CPython itself, and the thread stays untraced.
  PyEval_SetTrace(trace, nullptr);
  if (PyThreadState_Get()->c_tracefunc != trace) return;
  // sys.monitoring gave the frame's start to the tracing tools first (from the highest id, 7,
  // down to sonde's 4): its call event is passed on here, as threading's bootstrap passes on
  // its own.
  if (started)
    if (PyFrameObject* frame = PyEval_GetFrame()) trace(nullptr, frame, PyTrace_CALL, Py_None);
}

bool install_line_tracing(const std::vector<std::string>& patterns) {
  g_line_patterns = patterns;
  g_line_pattern_matched.assign(patterns.size(), false);
  if (patterns.empty()) return true;
  g_lines_on = true;
  PyObject* hook = PyCFunction_New(&g_bootstrap_trace_def, nullptr);
  if (hook == nullptr) return false;
  bool ok = set_threading_hook("settrace", hook);
  Py_DECREF(hook);
  return ok && set_trace_all(trace);
}

bool install_all_threads(bool builtins) {
  if (!code_table_init()) return false;
  g_builtins = builtins;
  PyObject* hook = PyCFunction_New(&g_bootstrap_def, nullptr);
  if (hook == nullptr) return false;
  bool ok = set_threading_hook("setprofile", hook);
  Py_DECREF(hook);
  return ok && set_profile_all(profile);
}

bool profile_function_replaced() {
#if PY_VERSION_HEX < 0x030C0000
  if (g_profile_taken) return true;
#endif
  PyThreadState* self = PyThreadState_Get();
  PyInterpreterState* interp = PyThreadState_GetInterpreter(self);
  for (PyThreadState* t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
    if (t->c_profilefunc == profile) continue;
    // None on a thread sonde never had (one a C library made to call into Python) is no loss;
    // on this one (which started sonde) it is a profiler's that has ended.
    if (t->c_profilefunc == nullptr && t != self) continue;
    // A new thread's bootstrap, before its first event.
    PyObject* obj = t->c_profileobj;
    if (obj != nullptr && PyCFunction_Check(obj) &&
        reinterpret_cast<PyCFunctionObject*>(obj)->m_ml == &g_bootstrap_def) {
      continue;
    }
    return true;
  }
  return false;
}

namespace {
// threading's hook for new threads (`attribute`: _profile_hook, _trace_hook) is no longer
// sonde's bootstrap `ours`: the program's threading.setprofile / settrace took it.
bool threading_hook_taken(const char* attribute, const PyMethodDef* ours) {
  PyObject* threading = PyImport_ImportModule("threading");
  if (threading == nullptr) {
    PyErr_Clear();
    return false;
  }
  PyObject* hook = PyObject_GetAttrString(threading, attribute);
  Py_DECREF(threading);
  if (hook == nullptr) {
    PyErr_Clear();
    return false;  // another threading: nothing to tell
  }
  bool kept = PyCFunction_Check(hook) && reinterpret_cast<PyCFunctionObject*>(hook)->m_ml == ours;
  Py_DECREF(hook);
  return !kept;
}
}  // namespace

bool threading_hook_replaced() { return threading_hook_taken("_profile_hook", &g_bootstrap_def); }

void uninstall_all_threads() {
  set_threading_hook("setprofile", Py_None);
  PyErr_Clear();
  set_profile_all(nullptr);
  PyErr_Clear();
  uninstall_line_tracing();
}

// A pattern that matched no function that ran: a note for the profile (which `sonde report --by
// line` reads back) and a line on stderr, where the user asked. Without them the report then
// told the user to run with --lines, which they had done (a red-team find).
void say_unmatched_line_patterns() {
  for (size_t i = 0; i < g_line_patterns.size(); ++i) {
    if (g_line_pattern_matched[i]) continue;
    g_line_pattern_matched[i] = true;  // said once
    std::string message =
        "--lines '" + g_line_patterns[i] +
        "' matched no function that ran: a pattern matches a function's name or its qualified "
        "name, as fnmatch does ('train_step', 'Model.forward', '*.forward')" +
        std::string(PY_VERSION_HEX < 0x030B0000 ? "; on Python 3.10, the name alone" : "");
    sonde::add_run_note("lines", message.c_str());
    // SONDE_LOG=quiet holds it to the note, as it does libsonde's own warnings.
    if (const char* level = std::getenv("SONDE_LOG");
        level == nullptr || std::strcmp(level, "quiet"))
      PySys_WriteStderr("sonde: %.900s\n", message.c_str());
  }
}

// A trace function of the program's own in the place of sonde's line tracer on a thread that
// had it: sys.settrace of a coverage tool, a debugger, line_profiler. sys.gettrace() gives the
// program None for sonde's (a C function with no object), so even one that restores what it
// found turns it off; the line costs after that went missing with no word (a red-team find).
bool line_tracer_replaced() {
  PyThreadState* self = PyThreadState_Get();
  PyInterpreterState* interp = PyThreadState_GetInterpreter(self);
  for (PyThreadState* t = PyInterpreterState_ThreadHead(interp); t; t = PyThreadState_Next(t)) {
    if (t->c_tracefunc == trace) continue;
    if (t->c_tracefunc == nullptr && t != self) continue;  // a thread sonde never had
    PyObject* obj = t->c_traceobj;
    if (obj != nullptr && PyCFunction_Check(obj) &&
        reinterpret_cast<PyCFunctionObject*>(obj)->m_ml == &g_bootstrap_trace_def)
      continue;
    return true;
  }
  return false;
}

void uninstall_line_tracing() {
  if (g_line_patterns.empty()) return;
  g_lines_on = false;
  say_unmatched_line_patterns();
  static bool said = false, said_threads = false;
  if (!said && line_tracer_replaced()) {
    said = true;
    sonde::add_run_note(
        "lines",
        "a trace function of the program's own (sys.settrace: a coverage tool, a debugger, "
        "line_profiler) took the place of sonde's --lines tracer on a thread: that thread's "
        "line costs after it were not recorded (its calls were)");
  }
  // threading.settrace of the program's own (or settrace(None)) in the place of the bootstrap
  // that gives each new thread sonde's line tracer: threads started after it timed no line, and
  // may have ended before the check of the live threads above sees them.
  if (!said_threads && threading_hook_taken("_trace_hook", &g_bootstrap_trace_def)) {
    said_threads = true;
    sonde::add_run_note(
        "lines",
        "the program's threading.settrace took the place of sonde's --lines tracer for the "
        "threads started after it: their line costs were not recorded (their calls were)");
  }
  set_threading_hook("settrace", Py_None);
  PyErr_Clear();
  set_trace_all(nullptr);
  PyErr_Clear();
}

}  // namespace sonde::python
