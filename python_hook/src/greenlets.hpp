// Greenlets (the greenlet package, and gevent and eventlet, which run on it) give one thread
// many Python call stacks, and switch between them by swapping the C stack in the middle of a
// frame. sonde's hooks see a frame's entry and exit on one C stack; without help, a greenlet
// switched to would open its frames on top of the frames of the one switched from, and each
// would close the other's. So sonde follows the switches through greenlet.settrace (per
// thread): at each switch the running greenlet's sonde frames are closed as a yield closes a
// generator's and set aside, and the target's are put back, so every greenlet is a call stack
// of its own under the thread's root, charged only the time it ran.
//
// Followed with the 3.11 hooks (frame evaluation, and the profile function of `--builtins`);
// on 3.12+ (sys.monitoring) not yet (greenlet 3 is needed there and was not available here).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

namespace sonde::python {

// An import has just ended on this thread (the hooks call it with the GIL held; it raises
// nothing and keeps a pending exception): once greenlet is among the modules, its switches on
// this thread are followed from here on. greenlet.settrace is per thread, and sonde does not
// set it on others: that would give every thread greenlet's state (a main greenlet), which
// greenlet's own tests see. So switches are followed on the thread that imported greenlet
// (nearly always the main thread, where gevent runs its hub), not on other threads.
void greenlets_import_ended();
// Whether greenlet was found imported (one load: the hooks test it before the call above).
bool greenlets_followed();

}  // namespace sonde::python
