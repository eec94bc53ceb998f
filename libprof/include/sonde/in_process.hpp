// libsonde loaded into an interpreter that is already running (`python3 -m sonde --in-process`)
// instead of preloaded. Libraries that load after it (numpy's BLAS, torch's oneDNN) resolve
// their calls through it as under LD_PRELOAD; what was bound to libc before it came (CPython's
// exit, _exit, exec*, sigaction), and what later libraries bind to libc, in_process_begin
// points at sonde's wrappers (symbols/rebind.hpp).
#pragma once

#include <string>
#include <vector>

#include "sonde/probe.hpp"  // SONDE_API

namespace sonde {

// The launcher's note that this process loaded libsonde itself; rebinds every loaded object.
// `shown` is the profile's name as the user gave it: the final flush at exit says where the
// profile went, as `sonde run` does after a preloaded run. False when libsonde is not recording.
SONDE_API bool in_process_begin(const std::string& shown);

// exit_begins of sonde/process_hooks.hpp: the host's exit begins (the launcher's last atexit
// function), before the interpreter's finalization. `status`: the one the interpreter will
// exit with, as the launcher saw the program end (libc's exit, loaded in-process, is not
// sonde's to see); -1 where not known.
SONDE_API void in_process_exit_begins(int status = -1);

// The final flush now, at the interpreter's last atexit call, before its teardown, where
// C's exit would make it after (python_hook's flush_before_teardown says where: CPython 3.10
// with daemon threads left). What runs after it (the teardown, those threads' last calls) is
// not in the profile. `status` as for in_process_exit_begins. Preloaded too (--re-exec).
SONDE_API void in_process_flush_before_teardown(int status = -1);

// The program set `sig`'s disposition through libc, past sonde's wrappers (where its object
// could not be rebound): sonde takes it as the host's and keeps its own handler underneath, as
// its sigaction wrapper would have.
SONDE_API void in_process_signal_set(int sig);

// "NAME=value" of the run's variables as sonde set them in the C environment (SONDE_RUN_ID,
// SONDE_OUTPUT, SONDE_PROCESS), which Python's os.environ, read at start-up, does not see.
SONDE_API std::vector<std::string> in_process_run_env();

// libsonde's path as LD_PRELOAD can carry it, for the run's children (sonde/preload_path.hpp: a
// link where the real path holds a space or a colon, the real path where none could be made);
// '' where sonde is not recording.
SONDE_API std::string in_process_preload();

}  // namespace sonde
