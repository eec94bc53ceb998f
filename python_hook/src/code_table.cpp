#include "code_table.hpp"

#include <cstdlib>

namespace sonde::python {

namespace {

// Open addressing with linear probing, deleted by shifting back (no tombstones), so that a
// lookup stops at the first empty slot. The arrays are never freed: code objects may still be
// deallocated after this module's static destructors have run.
struct Slot {
  PyCodeObject* key;
  uintptr_t value;
};
Slot* g_slots = nullptr;
size_t g_mask = 0;  // capacity - 1
int g_shift = 64;   // 64 - log2(capacity)
size_t g_size = 0;
destructor g_code_dealloc = nullptr;  // the code type's own

size_t home(const PyCodeObject* code) {
  return size_t((uintptr_t(code) * 0x9E3779B97F4A7C15ull) >> g_shift);
}

bool grow() {
  size_t capacity = g_slots == nullptr ? 1024 : (g_mask + 1) * 2;
  auto* slots = static_cast<Slot*>(calloc(capacity, sizeof(Slot)));
  if (slots == nullptr) return false;
  Slot* old = g_slots;
  size_t old_capacity = old == nullptr ? 0 : g_mask + 1;
  g_slots = slots;
  g_mask = capacity - 1;
  g_shift = 64 - __builtin_ctzll(capacity);
  for (size_t i = 0; i < old_capacity; ++i) {
    if (old[i].key == nullptr) continue;
    size_t j = home(old[i].key);
    while (g_slots[j].key != nullptr) j = (j + 1) & g_mask;
    g_slots[j] = old[i];
  }
  free(old);
  return true;
}

void erase(PyCodeObject* code) {
  size_t i = home(code);
  while (g_slots[i].key != code) {
    if (g_slots[i].key == nullptr) return;
    i = (i + 1) & g_mask;
  }
  // Entries after the hole that probed past it move back into it.
  for (size_t j = (i + 1) & g_mask; g_slots[j].key != nullptr; j = (j + 1) & g_mask) {
    size_t h = home(g_slots[j].key);
    if (((j - h) & g_mask) >= ((j - i) & g_mask)) {
      g_slots[i] = g_slots[j];
      i = j;
    }
  }
  g_slots[i] = {nullptr, 0};
  --g_size;
}

// Code objects of other interpreters are never entered, and one with its own GIL (3.12+) may
// run this concurrently with the main interpreter: it must not touch the table.
bool in_main_interpreter() {
#if PY_VERSION_HEX >= 0x030D0000
  PyThreadState* t = PyThreadState_GetUnchecked();
#else
  PyThreadState* t = _PyThreadState_UncheckedGet();
#endif
  return t != nullptr && PyThreadState_GetInterpreter(t) == PyInterpreterState_Main();
}

void code_dealloc(PyObject* code) {
  if (g_size != 0 && in_main_interpreter()) erase(reinterpret_cast<PyCodeObject*>(code));
  g_code_dealloc(code);
}

}  // namespace

bool code_table_init() {
  if (g_code_dealloc != nullptr) return true;
  if (!grow()) {
    PyErr_NoMemory();
    return false;
  }
  g_code_dealloc = PyCode_Type.tp_dealloc;
  PyCode_Type.tp_dealloc = code_dealloc;
  return true;
}

uintptr_t code_table_find(PyCodeObject* code) {
  for (size_t i = home(code);; i = (i + 1) & g_mask) {
    const Slot& s = g_slots[i];
    if (s.key == code) return s.value;
    if (s.key == nullptr) return 0;
  }
}

void code_table_insert(PyCodeObject* code, uintptr_t value) {
  // At most half full, so that probes stay short; without memory the entry is not kept and the
  // code object is looked up again on its next call.
  if ((g_size + 1) * 2 > g_mask + 1 && !grow()) return;
  size_t i = home(code);
  while (g_slots[i].key != nullptr && g_slots[i].key != code) i = (i + 1) & g_mask;
  if (g_slots[i].key == nullptr) ++g_size;
  g_slots[i] = {code, value};
}

}  // namespace sonde::python
