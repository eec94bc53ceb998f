// The library constructor, kept out of sonde_core so that the unit tests link the real core
// without starting a profiler inside the test program. Only libsonde.so compiles this file.
#include "runtime/runtime.hpp"

// Priority 101: before the wrappers' constructors register their routines.
__attribute__((constructor(101))) static void sonde_library_init() { sonde::Runtime::init(); }
