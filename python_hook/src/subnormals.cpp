#include "subnormals.hpp"

#include <opcode.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpython_compat.hpp"
#include "frames.hpp"

namespace sonde::python {
namespace {

constexpr Py_ssize_t kCheckedElements = 128;
constexpr Py_ssize_t kContainerItems = 16;  // values of a dict argument, items of a list

struct Found {
  double elements = 0;   // of the checked arrays, all of their elements
  double subnormal = 0;  // of those, the estimated subnormal ones
  double bytes = 0;      // the checked arrays' sizes
};

struct RoutineCounts {
  double elements = 0, subnormal = 0, bytes = 0;
  std::uint64_t sampled = 0, flagged = 0;
  bool noted = false;          // the run note is written
  bool bytes_written = false;  // python.arg_bytes is in run_info
  std::string name;            // set when first written
};

// The share of subnormal elements in a routine's sampled arguments below which no note is
// written: under 0.1 %, FTZ/DAZ would give back under 0.2 % of its time at a 3x penalty.
constexpr double kNotedShare = 1e-3;

// A call whose float array arguments come to this much on average is one whose arrays an
// element-wise phase must at least read: its bytes bound an update's gain (docs/metrics.md,
// optimizer-update). Smaller ones are not worth a run_info row.
constexpr double kArgBytesKept = 64 * 1024;

// Guarded by the GIL; never freed (a thread may sample while the interpreter finalises).
std::unordered_map<RoutineId, RoutineCounts>& counts() {
  static auto* map = new std::unordered_map<RoutineId, RoutineCounts>();
  return *map;
}

// 4 for float32, 8 for float64 in native byte order, else 0.
int float_size(const Py_buffer& view) {
  const char* f = view.format != nullptr ? view.format : "B";
  if (*f == '@' || *f == '=' || *f == '<') ++f;
  if (std::strcmp(f, "f") == 0 && view.itemsize == 4) return 4;
  if (std::strcmp(f, "d") == 0 && view.itemsize == 8) return 8;
  return 0;
}

bool subnormal_at(const char* p, int size) {
  if (size == 4) {
    std::uint32_t b;
    std::memcpy(&b, p, 4);
    return (b & 0x7f800000u) == 0 && (b & 0x007fffffu) != 0;
  }
  std::uint64_t b;
  std::memcpy(&b, p, 8);
  return (b & 0x7ff0000000000000ull) == 0 && (b & 0x000fffffffffffffull) != 0;
}

// The arrays of a call whose verdict waits for its end, with what the start found.
struct Pending {
  const void* key;
  RoutineId routine;
  PyCodeObject* code;              // a reference
  Found found;                     // elements and bytes as at the start
  std::vector<PyObject*> flagged;  // references to the arrays with subnormal samples
};
// At most this many calls wait at once (frames that never end: an abandoned generator, a
// greenlet left suspended); the oldest is then recorded as its start found it.
constexpr size_t kPendingMax = 8;

// Guarded by the GIL, per thread (only sampled calls with subnormal values reach it).
std::vector<Pending>& pending() {
  static thread_local std::vector<Pending> calls;
  return calls;
}

void check_buffer(PyObject* o, Found& found);

// numpy's array object as its ndarraytypes.h lays it out (PyArrayObject_fields, unchanged from
// numpy 1.7 to 2.x), and the head of its dtype (PyArray_Descr: type_num keeps its place in
// 2.x, where the fields after it changed). Read directly because exporting a numpy array's
// buffer is not free of effects: numpy keeps the buffer info it made on the array, which
// numpy's own test_error_if_stored_buffer_info_is_corrupted sees.
struct NumpyArray {
  PyObject_HEAD char* data;
  int nd;
  Py_ssize_t* dimensions;
  Py_ssize_t* strides;
  PyObject* base;
  PyObject* descr;
  int flags;
};
struct NumpyDescr {
  PyObject_HEAD PyTypeObject* typeobj;
  char kind, type, byteorder, flags;
  int type_num;
};
constexpr int kNumpyFloat = 11, kNumpyDouble = 12;  // NPY_FLOAT, NPY_DOUBLE
constexpr int kNumpyCContiguous = 0x0001;           // NPY_ARRAY_C_CONTIGUOUS

// numpy.ndarray, once an argument showed it (numpy is the program's import, never sonde's).
PyTypeObject* g_ndarray = nullptr;

// 1: a numpy array (or subclass), -1: another numpy type (its scalars export buffers too, with
// the same kept info), 0: not numpy's.
int numpy_kind(PyTypeObject* type) {
  if (g_ndarray != nullptr && PyType_IsSubtype(type, g_ndarray)) return 1;
  for (PyTypeObject* t = type; t != nullptr; t = t->tp_base) {
    if (std::strcmp(t->tp_name, "numpy.ndarray") == 0) {
      g_ndarray = t;
      return 1;
    }
  }
  return std::strncmp(type->tp_name, "numpy.", 6) == 0 ? -1 : 0;
}

// Sampled subnormal count of `n` elements of `size` bytes: every step-th flat index.
Py_ssize_t sample(const char* base, Py_ssize_t n, int size, bool contiguous, int ndim,
                  const Py_ssize_t* shape, const Py_ssize_t* strides, Py_ssize_t k) {
  Py_ssize_t step = n / k, hits = 0;
  if (contiguous) {  // the usual array: no index arithmetic
    for (Py_ssize_t i = 0; i < k; ++i) hits += subnormal_at(base + i * step * size, size);
    return hits;
  }
  for (Py_ssize_t i = 0; i < k; ++i) {
    Py_ssize_t flat = i * step, offset = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      offset += (flat % shape[d]) * strides[d];
      flat /= shape[d];
    }
    hits += subnormal_at(base + offset, size);
  }
  return hits;
}

void add_found(Found& found, Py_ssize_t n, int size, Py_ssize_t hits, Py_ssize_t k) {
  found.elements += static_cast<double>(n);
  found.subnormal += static_cast<double>(n) * static_cast<double>(hits) / static_cast<double>(k);
  found.bytes += static_cast<double>(n) * size;
}

void check_numpy(PyObject* o, Found& found) {
  const auto* a = reinterpret_cast<const NumpyArray*>(o);
  const auto* d = reinterpret_cast<const NumpyDescr*>(a->descr);
  if (d == nullptr || a->data == nullptr || d->byteorder == '>') return;
  int size = d->type_num == kNumpyFloat ? 4 : d->type_num == kNumpyDouble ? 8 : 0;
  if (size == 0) return;
  Py_ssize_t n = 1;
  for (int i = 0; i < a->nd; ++i) n *= a->dimensions[i];
  if (n <= 0) return;
  Py_ssize_t k = std::min(n, kCheckedElements);
  Py_ssize_t hits = sample(a->data, n, size, (a->flags & kNumpyCContiguous) != 0, a->nd,
                           a->dimensions, a->strides, k);
  add_found(found, n, size, hits, k);
}

void check_buffer_into(PyObject* o, Found& found, std::vector<PyObject*>* flagged) {
  double before = found.subnormal;
  check_buffer(o, found);
  if (flagged != nullptr && found.subnormal > before) {
    Py_INCREF(o);
    flagged->push_back(o);
  }
}

void check_buffer(PyObject* o, Found& found) {
  PyTypeObject* type = Py_TYPE(o);
  if (type->tp_as_buffer == nullptr || type->tp_as_buffer->bf_getbuffer == nullptr) return;
  // numpy's arrays, their Python subclasses (np.matrix, np.memmap) included, are read in place.
  if (int kind = numpy_kind(type); kind != 0) {
    if (kind > 0) check_numpy(o, found);
    return;
  }
  // C types only: a Python class's __buffer__ (3.12) would run Python code inside the hook.
  if (type->tp_flags & Py_TPFLAGS_HEAPTYPE) return;
  // Other C buffers (array.array, bytearray, memoryview) keep nothing of an export.
  Py_buffer view;
  if (PyObject_GetBuffer(o, &view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return;
  }
  int size = float_size(view);
  Py_ssize_t n = 1;
  for (int d = 0; d < view.ndim; ++d) n *= view.shape[d];
  if (size != 0 && n > 0) {
    Py_ssize_t k = std::min(n, kCheckedElements);
    Py_ssize_t hits =
        sample(static_cast<const char*>(view.buf), n, size, PyBuffer_IsContiguous(&view, 'C') != 0,
               view.ndim, view.shape, view.strides, k);
    add_found(found, n, size, hits, k);
  }
  PyBuffer_Release(&view);
}

void check_object(PyObject* o, Found& found, std::vector<PyObject*>* flagged) {
  if (PyDict_CheckExact(o)) {
    Py_ssize_t pos = 0, seen = 0;
    PyObject *key, *value;
    while (seen++ < kContainerItems && PyDict_Next(o, &pos, &key, &value))
      check_buffer_into(value, found, flagged);
  } else if (PyList_CheckExact(o) || PyTuple_CheckExact(o)) {
    Py_ssize_t n = std::min(PySequence_Fast_GET_SIZE(o), kContainerItems);
    for (Py_ssize_t i = 0; i < n; ++i)
      check_buffer_into(PySequence_Fast_GET_ITEM(o, i), found, flagged);
  } else {
    check_buffer_into(o, found, flagged);
  }
}

void record(RoutineId routine, PyCodeObject* code, const Found& found);

// The operators that compute on their operands: numpy applies them element-wise (`p -= lr * g`,
// `m * b1`). Subscripts, comparisons and bitwise operators are not among them.
bool computes(int op) {
  switch (op) {
#if PY_VERSION_HEX >= 0x030B0000
    case BINARY_OP:
#else
    case BINARY_POWER:
    case BINARY_MULTIPLY:
    case BINARY_MATRIX_MULTIPLY:
    case BINARY_MODULO:
    case BINARY_ADD:
    case BINARY_SUBTRACT:
    case BINARY_FLOOR_DIVIDE:
    case BINARY_TRUE_DIVIDE:
    case INPLACE_POWER:
    case INPLACE_MULTIPLY:
    case INPLACE_MATRIX_MULTIPLY:
    case INPLACE_MODULO:
    case INPLACE_ADD:
    case INPLACE_SUBTRACT:
    case INPLACE_FLOOR_DIVIDE:
    case INPLACE_TRUE_DIVIDE:
#endif
    case UNARY_NEGATIVE:
      return true;
    default:
      return false;
  }
}

// Only a function that applies an arithmetic operator can have its arguments as operands; one
// that does not hands them on, tests them, converts or fills them. numpy's __array_function__
// dispatchers (`def copyto(dst, src, casting=None, where=None): return (dst, src, where)`) run
// before the C function they stand for fills its output: np.ones is np.empty and then copyto,
// and memory that held small integers reads as subnormal floats, which flagged
// scikit-learn's np.ones/np.full calls. Chainer's cuda.py from_array (type tests, then the
// array back) flagged fresh np.empty buffers, overwritten before any arithmetic, in 5 of 9
// runs. A function that only calls numpy's functions by name (np.tanh(x)) is not checked
// either: its BLAS and oneDNN operands are, by the wrappers.
bool computes_on_arguments(PyCodeObject* code) {
  PyObject* bytes = code_bytes(code);  // cached by the interpreter after the first time
  if (bytes == nullptr) {
    PyErr_Clear();
    return false;
  }
  const auto* ops = reinterpret_cast<const unsigned char*>(PyBytes_AS_STRING(bytes));
  Py_ssize_t n = PyBytes_GET_SIZE(bytes);
  bool found = false;
  for (Py_ssize_t i = 0; i + 1 < n && !found; i += 2) found = computes(ops[i]);
  Py_DECREF(bytes);
  return found;
}

// Records the call of `p` with `found`, and lets its references go.
void let_go(Pending& p, const Found& found) {
  record(p.routine, p.code, found);
  for (PyObject* o : p.flagged) Py_DECREF(o);
  Py_DECREF(p.code);
}

// Records the call of `p` with the subnormal values its flagged arrays hold now.
void settle(Pending& p) {
  Found now;
  for (PyObject* o : p.flagged) check_buffer(o, now);
  Found found = p.found;
  found.subnormal = std::min(now.subnormal, found.subnormal);
  let_go(p, found);
}

}  // namespace

int argument_slots(PyCodeObject* code) {
  return code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) != 0) +
         ((code->co_flags & CO_VARKEYWORDS) != 0);
}

namespace {

void record(RoutineId routine, PyCodeObject* code, const Found& found) {
  RoutineCounts& c = counts()[routine];
  ++c.sampled;
  c.elements += found.elements;
  c.subnormal += found.subnormal;
  c.bytes += found.bytes;
  // The mean is written when it first reaches kArgBytesKept, then refreshed at the 1st, 2nd,
  // 4th, 8th ... sampled call: a string and a run_info update on log2(n) of a routine's checks,
  // not on each. Waiting for a power of two alone lost it where the small arrays came first: a
  // bias's 16 KB at the 8th check of 11 left no row at all (CI, test_advice).
  bool power_of_two = (c.sampled & (c.sampled - 1)) == 0;
  bool write_bytes = c.bytes_written ? power_of_two : c.bytes >= kArgBytesKept * c.sampled;
  if (c.name.empty() && (found.subnormal > 0 || write_bytes)) c.name = code_display_name(code);
  if (write_bytes) {
    char value[64];
    std::snprintf(value, sizeof value, "%.0f %llu", c.bytes / c.sampled,
                  static_cast<unsigned long long>(c.sampled));
    set_run_fact(("python.arg_bytes:" + c.name).c_str(), value);
    c.bytes_written = true;
  }
  if (found.subnormal > 0) ++c.flagged;
  // Said once, when the share is one worth a word: a few subnormal elements among millions
  // (a note that read "share 0.000000") cost nothing FTZ/DAZ would give back.
  if (c.flagged > 0 && !c.noted && c.subnormal >= kNotedShare * c.elements) {
    c.noted = true;
    std::string note =
        "subnormal (denormal) values were found in the float array arguments of "
        "sampled calls of " +
        c.name + " (share: run_info python.subnormal:" + c.name +
        "); arithmetic on them is slow unless FTZ/DAZ is on";
    add_run_note("denormals", note.c_str());
  }
  if (c.flagged > 0) {
    char value[96];
    std::snprintf(value, sizeof value, "%.6f %llu %llu", c.subnormal / c.elements,
                  static_cast<unsigned long long>(c.flagged),
                  static_cast<unsigned long long>(c.sampled));
    set_run_fact(("python.subnormal:" + c.name).c_str(), value);
  }
}

}  // namespace

bool check_subnormal_arguments(RoutineId routine, PyCodeObject* code, PyObject* const* args,
                               int nargs, const void* key) {
  if (PyErr_Occurred()) return false;  // a frame entered to handle an exception: leave it alone
  Found found;
  std::vector<PyObject*> flagged;
  for (int i = 0; i < nargs; ++i)
    if (args[i] != nullptr) check_object(args[i], found, &flagged);
  // No float arrays: not a call this check speaks for. Asked first, being the cheaper question
  // on most calls (a few type slots, against a scan of the bytecode).
  bool speaks = found.elements > 0 && computes_on_arguments(code);
  if (!speaks) {
    for (PyObject* o : flagged) Py_DECREF(o);
    return false;
  }
  if (flagged.empty()) {
    record(routine, code, found);
    return false;
  }
  std::vector<Pending>& waiting = pending();
  if (waiting.size() == kPendingMax) {  // the oldest never ended: as its start found it
    let_go(waiting.front(), waiting.front().found);
    waiting.erase(waiting.begin());
  }
  Py_INCREF(code);
  waiting.push_back(Pending{key, routine, code, found, std::move(flagged)});
  return true;
}

const void* settle_subnormal_arguments(const void* key) {
  std::vector<Pending>& waiting = pending();
  for (size_t i = waiting.size(); i-- > 0;) {
    if (waiting[i].key != key) continue;
      // The frame may be leaving with an exception: the buffer reads must not clear it.
#if PY_VERSION_HEX >= 0x030C0000
    PyObject* raised = PyErr_GetRaisedException();
#else
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
#endif
    Pending p = std::move(waiting[i]);
    waiting.erase(waiting.begin() + long(i));
    settle(p);
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(raised);
#else
    PyErr_Restore(type, value, traceback);
#endif
    break;
  }
  return waiting.empty() ? nullptr : waiting.back().key;
}

#if PY_VERSION_HEX >= 0x030C0000
const void* check_subnormal_arguments_of_current_frame(RoutineId routine, PyCodeObject* code) {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed: the function sys.monitoring started
  int nargs = std::min(argument_slots(code), 16);
  if (frame == nullptr || nargs == 0) return nullptr;
  PyCodeObject* running = PyFrame_GetCode(frame);
  Py_DECREF(running);
  if (running != code) return nullptr;
  PyObject* names = PyCode_GetVarnames(code);
  if (names == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* args[16] = {};
  for (int i = 0; i < nargs && i < PyTuple_GET_SIZE(names); ++i) {
    args[i] = PyFrame_GetVar(frame, PyTuple_GET_ITEM(names, i));
    if (args[i] == nullptr) PyErr_Clear();
  }
  bool waits = check_subnormal_arguments(routine, code, args, nargs, frame);
  for (PyObject* a : args) Py_XDECREF(a);
  Py_DECREF(names);
  return waits ? frame : nullptr;
}
#endif

}  // namespace sonde::python
