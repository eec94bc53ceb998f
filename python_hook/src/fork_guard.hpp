// os.fork and os.forkpty without sonde's thread in the process, on CPython 3.12 and later:
// their DeprecationWarning ("This process is multi-threaded, use of fork() may lead to
// deadlocks in the child") counts the process's native threads after the fork, and sonde's
// flusher made every program that forks warn, its stderr and warnings.catch_warnings() alike.
#pragma once

#include <Python.h>

namespace sonde::python {

// Puts wrappers in place of posix.fork and posix.forkpty (os's are the same objects) that end
// sonde's flusher thread for the call and start it again after it in the parent. Once per
// process; nothing before 3.12, which does not warn. False with a Python exception set.
bool guard_fork();

}  // namespace sonde::python
