// os.fork and os.forkpty without sonde's thread in the process, on CPython 3.12 and later:
// their DeprecationWarning ("This process is multi-threaded, use of fork() may lead to
// deadlocks in the child") counts the process's native threads after the fork, and sonde's
// flusher made every program that forks warn, its stderr and warnings.catch_warnings() alike.
// Here in libsonde, not in the Python hook's extension, so that a program run under
// LD_PRELOAD alone or `sonde run` without --python (no hook) forks as it does without sonde.
//
// CPython's API is looked up in the process (dlsym), its stable-ABI functions only, so that
// libsonde depends on no one Python version.
#pragma once

#include <string>
#include <vector>

#include "sonde/probe.hpp"

namespace sonde {

// At the library's start in a CPython 3.12+ process that has not initialized its interpreter
// yet (a preloaded libsonde): adds a C audit hook (PySys_AddAuditHook, which CPython takes
// before it starts) that guards os.fork at the interpreter's first `cpython.run_*` event,
// as the program's own code is about to run. Nothing in other processes, nor where CPython
// would free that hook through its debug allocator (python_fork.cpp says why); `args`: the
// process's command line.
void watch_for_python_start(const std::vector<std::string>& args);

// guard_python_fork (sonde/probe.hpp) puts the wrappers in place.

}  // namespace sonde
