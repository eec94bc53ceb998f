// Python frames through sys.monitoring (PEP 669, CPython 3.12 and later): sonde holds a tool id
// of its own and gets a C callback when a Python frame starts, resumes, yields, returns
// or unwinds, in every thread. Unlike a profile function it leaves the interpreter on its
// specialised path; with `builtins` it also takes the CALL event and C_RETURN / C_RAISE, so
// C functions are recorded too. Before 3.12 it is not available (eval_frame.hpp on 3.11).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace sonde::python {

// True where this build of the extension has the sys.monitoring hook (CPython 3.12+).
bool monitoring_available();
// Takes sonde's sys.monitoring tool id (4) and enables the events. Returns false with a Python
// exception set on failure, or without one (after one line on stderr) when another tool holds the
// id: the caller then falls back to the profile function.
bool install_monitoring(bool builtins);
// The next `n` calls on this thread that the hook sees are not recorded: the launcher's own.
void monitoring_skip_calls(int n);
// Disables the events and gives the tool id back. Frames still open stay open (as with the
// profile function): their returns are no longer seen.
void uninstall_monitoring();

}  // namespace sonde::python
