// What sonde knows about each code object (its routine id and whether its lines are timed), kept
// in sonde's own table rather than in the code object: a co_extra slot is seen by every other
// user of code extras (their free function is called for code objects only sonde tagged, and a
// slot index is valid in one interpreter only). An entry lives as long as its code object: the
// code type's deallocator is wrapped to drop it, so a new code object at a freed one's address
// is never taken for it. Only the main interpreter's code objects are entered; every call holds
// the GIL.
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

namespace sonde::python {

// Wraps the code type's deallocator, once per process. Returns false with a Python exception
// set.
bool code_table_init();
// The value stored for `code`, 0 if none (stored values are never 0). Hot path: a hash probe.
uintptr_t code_table_find(PyCodeObject* code);
// Stores `value` (not 0) for `code`; may allocate.
void code_table_insert(PyCodeObject* code, uintptr_t value);

}  // namespace sonde::python
