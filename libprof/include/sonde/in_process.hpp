// libsonde loaded into an interpreter that is already running (`python3 -m sonde --in-process`)
// instead of preloaded. Libraries that load after it (numpy's BLAS, torch's oneDNN) resolve
// their calls through it as under LD_PRELOAD, but CPython bound exit, _exit, exec* and sigaction
// to libc before sonde came: the Python launcher calls these where the preloaded wrappers would.
#pragma once

#include <string>
#include <vector>

#include "sonde/probe.hpp"  // SONDE_API

namespace sonde {

// The launcher's note that this process loaded libsonde itself. `shown` is the profile's name
// as the user gave it: the final flush at exit says where the profile went, as `sonde run`
// does after a preloaded run. False when libsonde is not recording.
SONDE_API bool in_process_begin(const std::string& shown);

// exit_begins, before_process_exit and prepare_exec of sonde/process_hooks.hpp: the host's exit
// begins (the launcher's last atexit function); the process ends without exit handlers
// (os._exit); an exec of `env` is next (os.exec*: flushed, and returns the environment the new
// image needs to join the run).
SONDE_API void in_process_exit_begins();
SONDE_API void in_process_before_exit(int status);
SONDE_API std::vector<std::string> in_process_exec_env(const std::vector<std::string>& env);
// prepare_spawn's: the environment a new process started with `env` needs to join the run as
// this one's child (subprocess with env=, os.posix_spawn), nothing flushed.
SONDE_API std::vector<std::string> in_process_spawn_env(const std::vector<std::string>& env);

// The program set `sig`'s disposition through libc (Python's signal.signal): sonde takes it as
// the host's and keeps its own handler underneath, as its sigaction wrapper would have.
SONDE_API void in_process_signal_set(int sig);

// "NAME=value" of the run's variables as sonde set them in the C environment (SONDE_RUN_ID,
// SONDE_OUTPUT, SONDE_PROCESS), which Python's os.environ, read at start-up, does not see.
SONDE_API std::vector<std::string> in_process_run_env();

}  // namespace sonde
