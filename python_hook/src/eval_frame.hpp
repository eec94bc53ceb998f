// Python frames through CPython's frame-evaluation hook (PEP 523), on 3.10 and 3.11: every
// Python frame the interpreter evaluates, in any thread, passes through one C function that
// opens a sonde frame before the default evaluator and closes it after. Unlike a profile
// function it leaves the interpreter on its fast path (3.11's specialised instructions; on
// 3.10, dispatch without the tracing check of every instruction); it sees no C functions (see
// frames.hpp for the hook that does). The frames it is handed differ by version:
// eval_frame_abi.hpp. On 3.12+ it is not built (sys.monitoring is: monitoring.hpp).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace sonde::python {

// True where this build of the extension has the frame-evaluation hook (CPython 3.10, 3.11).
bool eval_frame_available();
// Installs it for the current interpreter (all its threads, now and later). Another hook
// installed before (a debugger's) keeps being called beneath it. Returns false with a Python
// exception set.
bool install_eval_frame();
// The next `n` Python frames entered on this thread are not recorded: the launcher's own.
void eval_frame_skip_calls(int n);
// Whether this thread's innermost hooked frame is the import machinery's: set aside with a
// greenlet's frames at a switch (greenlets.hpp). A flag of no use where the hook is not built.
bool& eval_frame_in_machinery();
// Puts back the evaluator that was there before, if sonde's is still the one installed. Frames
// running inside the hook still close their sonde frames when they return.
void uninstall_eval_frame();

}  // namespace sonde::python
