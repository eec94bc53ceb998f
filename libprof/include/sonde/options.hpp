// The SONDE_* environment variables, described once. The runtime parses them from this table
// (libprof/src/config.cpp) and the CLI prints its help from it, so the two cannot drift apart.
#pragma once

#include <array>
#include <string_view>

namespace sonde {

enum class OptionType { kPath, kBool, kUInt, kSeconds, kList, kLevel, kText };

struct OptionSpec {
  std::string_view name;           // environment variable
  OptionType type;
  std::string_view default_value;  // as it would be written in the environment
  std::string_view help;
};

inline constexpr std::array kOptionSpecs{
    OptionSpec{"SONDE_OUTPUT", OptionType::kPath, "sonde-<pid>.db",
               "Profile database to write. An existing file of another run is never "
               "overwritten: the profile then goes to <name>.<pid>.db, with a warning."},
    OptionSpec{"SONDE_TRACE", OptionType::kBool, "0",
               "1 also records every call as a timed event (trace mode), through bounded "
               "per-thread buffers; dropped events are counted in the file."},
    OptionSpec{"SONDE_TRACE_BUFFER", OptionType::kUInt, "1048576",
               "Trace events buffered per thread between two flushes; events beyond are "
               "dropped and counted."},
    OptionSpec{"SONDE_FLUSH_INTERVAL", OptionType::kSeconds, "10",
               "Seconds between periodic flushes (0: only at exit, exec and signals). A crash "
               "loses at most this much."},
    OptionSpec{"SONDE_COUNTERS", OptionType::kList, "",
               "Comma-separated PAPI events to count per call path, at most 4 (e.g. "
               "perf::TASK-CLOCK,perf::PAGE-FAULTS); missing ones are reported and skipped."},
    OptionSpec{"SONDE_PYTHON", OptionType::kBool, "1",
               "0: child interpreters of a `python3 -m sonde` run do not start the Python hook."},
    OptionSpec{"SONDE_PYTHON_BUILTINS", OptionType::kBool, "0",
               "1: the Python hook also records calls of C functions (builtins, numpy.dot) "
               "through CPython's profile function, at about 4 times the cost per Python call; "
               "0: Python frames only, through the frame-evaluation hook (CPython 3.11). "
               "`python3 -m sonde --builtins` sets it."},
    OptionSpec{"SONDE_PEAKS", OptionType::kPath, "~/.cache/sonde/peaks.txt",
               "Peak rates (written by `sonde calibrate`, or by hand) copied into each "
               "profile for % of peak; $XDG_CACHE_HOME/sonde/peaks.txt when that is set."},
    OptionSpec{"SONDE_LOG", OptionType::kLevel, "warn",
               "How much sonde says on stderr: quiet, warn, info or debug."},
    OptionSpec{"SONDE_MAX_DEPTH", OptionType::kUInt, "256",
               "Deepest call path recorded per thread; deeper calls are charged to the "
               "deepest frame and counted in the file's notes."},
    OptionSpec{"SONDE_CUPTI_LIBRARY", OptionType::kPath, "libcupti.so.13",
               "The CUPTI library to load in processes that use CUDA; by default the loader's "
               "search, then /usr/local/cuda/lib64 and extras/CUPTI/lib64."},
    OptionSpec{"SONDE_GPU_METRICS", OptionType::kList, "",
               "Comma-separated CUPTI metrics to count per kernel launch through the range "
               "profiler (e.g. smsp__inst_executed.sum); `tau` stands for the counts of TAU's "
               "warps per instruction and global loads per instruction. Kernels are replayed "
               "and serialised: time a run without it. Unknown metrics are reported and "
               "skipped."},
    OptionSpec{"SONDE_RUN_ID", OptionType::kText, "",
               "Set by sonde itself so that fork and exec children join their parent's run; "
               "not for users."},
};

}  // namespace sonde
