// A Python interpreter that runs without sonde's Python hook (`sonde run -- python3 train.py`,
// LD_PRELOAD alone, torchrun's workers under `sonde run`): its profile holds native calls only,
// no Python frames, torch operators or torch.distributed collectives, and nothing said so.
#pragma once

#include <string>

#include "runtime/facts.hpp"

namespace sonde {

// The python-hook note's text: why the hook did not start where the autostart said so
// (run_info python.hook_failed: no extension for this CPython in the install), else how to
// start it.
std::string python_hook_note(Facts& facts);

// True when the process defines CPython's API (Py_IsInitialized, exported by every python3
// executable and libpython) and no hook started in it (the hook sets run_info python.hook).
bool python_without_hook(Facts& facts);

// Asks whether the process holds an interpreter, where it may ask the loader (not in a signal's
// flush): at start, so that a fork child or a signal's flush has the answer.
void remember_python_presence();

}  // namespace sonde
