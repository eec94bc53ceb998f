// A Python interpreter that runs without sonde's Python hook (`sonde run -- python3 train.py`,
// LD_PRELOAD alone, torchrun's workers under `sonde run`): its profile holds native calls only,
// no Python frames, torch operators or torch.distributed collectives, and nothing said so.
#pragma once

#include <string>

#include "runtime/facts.hpp"

namespace sonde {

// The note's text (topic "python-hook").
inline constexpr const char* kPythonWithoutHookNote =
    "this process is a Python interpreter that ran without sonde's Python hook: its profile "
    "holds native calls only (no Python frames, torch operators or torch.distributed "
    "collectives); run it with python3 -m sonde, or sonde run --python. A child interpreter "
    "of such a run starts the hook through PYTHONPATH, which -I and -E ignore and a cleared "
    "environment (env -i, subprocess's env={}) drops";

// The note where the autostart said why the hook did not start (run_info python.hook_failed).
std::string python_hook_failed_note(const std::string& why);

// True when the process defines CPython's API (Py_IsInitialized, exported by every python3
// executable and libpython) and no hook started in it (the hook sets run_info python.hook).
bool python_without_hook(Facts& facts);

// Asks whether the process holds an interpreter, where it may ask the loader (not in a signal's
// flush): at start, so that a fork child or a signal's flush has the answer.
void remember_python_presence();

}  // namespace sonde
