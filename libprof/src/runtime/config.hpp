// The runtime's configuration: parsed once at start-up from the SONDE_* variables described in
// sonde/options.hpp. Nothing else in libprof calls getenv.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/log.hpp"

namespace sonde {

struct Config {
  std::string output;  // empty: sonde-<pid>.db in the working directory
  bool trace = false;
  uint64_t trace_buffer = 1u << 20;  // events per thread
  uint64_t trace_memory_mb = 256;    // all threads' trace buffers together
  double flush_interval_s = 10.0;
  std::vector<std::string> counters;
  LogLevel log_level = LogLevel::kWarn;
  uint32_t max_depth = 1024;         // Python's recursion limit is 1,000 by default
  uint32_t sample_hz = 0;            // 0: the sampler is off
  uint32_t adaptive = 0;             // SONDE_ADAPTIVE: 0 off, else time 1 call in this many (1: 16)
  bool record_args = true;           // false: the command's name only
  bool ftz = false;                  // SONDE_FTZ: MXCSR FTZ|DAZ in every thread
  double delay_s = 0;                // SONDE_DELAY: the collection window opens this late
  int64_t delay_until_ns = 0;        // SONDE_DELAY_UNTIL: the launch's deadline (CLOCK_REALTIME)
  uint64_t steps = 0;                // SONDE_STEPS: ... or after this many step regions
  std::string step_region = "step";  // SONDE_STEP_REGION
  std::string run_id;                // inherited from the parent process of the same run
  std::string process_ref;           // SONDE_PROCESS: "pid:process_id" of the parent
  std::string exec_of;               // SONDE_EXEC_OF: "pid:process_id" of the image exec replaced
  std::string say_written;     // SONDE_SAY_WRITTEN: the output's name an exec'd image says at exit
  std::string unprofiled;      // SONDE_UNPROFILED: the profile a process of the run could not write
  std::string peaks_file;      // SONDE_PEAKS, else the calibration cache of this user
  bool peaks_default = false;  // peaks_file is the cache's path, not one the user named
  std::string cupti_library;   // empty: the runtime's CUPTI (gpu/cupti_search.hpp)
  std::vector<std::string> gpu_metrics;  // CUPTI metrics per kernel; `tau` stands for a set
  std::string cuda_injection;  // CUDA_INJECTION64_PATH: a tool CUDA injects (Nsight), not sonde's
};

using EnvLookup = const char* (*)(const char*);

// Parses the environment through `lookup` (getenv in production). A bad value produces one
// warning naming the variable and the default used instead (in the run's root process only);
// it never fails.
Config parse_config(EnvLookup lookup);

// SONDE_FTZ alone, for a thread started before the runtime has parsed the rest (a library's
// constructor that starts its pool); no warning, the runtime's parse gives it.
bool ftz_requested(EnvLookup lookup);

}  // namespace sonde
