// Every environment variable sonde reads, described once. The runtime parses them from this
// table (libprof/src/runtime/config.cpp), `sonde run --help` prints it, and README.md's
// environment table is `sonde env-table`'s output (a test compares them), so none can drift.
// Nothing in sonde reads a SONDE_* variable this table does not declare.
#pragma once

#include <array>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <string_view>
#include <system_error>

namespace sonde {

enum class OptionType { kPath, kBool, kUInt, kSeconds, kList, kLevel, kText };

// Who reads a variable: the preloaded library, `sonde run`, or `python3 -m sonde`.
enum class OptionReader { kLibrary, kLauncher, kPython };

struct OptionSpec {
  std::string_view name;  // environment variable
  OptionType type;
  std::string_view default_value;  // as it would be written in the environment
  std::string_view help;           // markdown: `code` is printed bare by `sonde run --help`
  // Numbers (kUInt, kSeconds) outside [min, max] are refused (0 too, unless zero_ok): an
  // absurd value must cost a warning, never a flush loop or a bad_alloc.
  double min = 0, max = 0;
  bool zero_ok = false;
  OptionReader reader = OptionReader::kLibrary;
  bool internal = false;  // set by sonde itself for its children; not for users
};

// A value within the spec's range (numbers only; other types always pass).
constexpr bool option_in_range(const OptionSpec& s, double v) {
  if (s.type != OptionType::kUInt && s.type != OptionType::kSeconds) return true;
  if (!(v == v)) return false;  // NaN
  if (v == 0) return s.zero_ok;
  return v >= s.min && v <= s.max;
}

// The number a kUInt (digits only) or kSeconds (a finite number >= 0) value stands for, NaN
// where it is none: one reading for the library's variables and sonde run's options that set
// them (sonde run's own took "1e3" for --steps, which the library then refused).
inline double option_number(const OptionSpec& spec, std::string_view v) {
  if (v.empty()) return std::nan("");
  if (spec.type == OptionType::kUInt) {
    unsigned long long u = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), u);
    return ec == std::errc() && p == v.data() + v.size() ? double(u) : std::nan("");
  }
  std::string s(v);
  char* end = nullptr;
  double d = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(d) && d >= 0 ? d : std::nan("");
}

inline constexpr std::array kOptionSpecs{
    OptionSpec{"SONDE_OUTPUT", OptionType::kPath, "sonde-<pid>.db",
               "Profile to write, where libsonde is preloaded by hand "
               "(`LD_PRELOAD=.../libsonde.so`). An existing file of another run is never "
               "overwritten: the profile then goes to `<name>.<pid>.db`, with a warning. "
               "Children of the run (fork, exec) write into the same file. `sonde run` and "
               "`python3 -m sonde` set it themselves from `-o` (default `sonde.db`): one set "
               "before them is not read."},
    OptionSpec{"SONDE_TRACE", OptionType::kBool, "0",
               "`1` also records every call as a timed event, through per-thread buffers "
               "bounded by `SONDE_TRACE_BUFFER` and `SONDE_TRACE_MEMORY`; dropped events are "
               "counted in `trace_drops` and a note."},
    OptionSpec{"SONDE_TRACE_BUFFER", OptionType::kUInt, "1048576",
               "Trace events buffered per thread between two flushes (1 to 268435456). Memory "
               "is taken in chunks as events arrive, not reserved up front; events beyond are "
               "dropped and counted.",
               1, double(1ull << 28)},
    OptionSpec{"SONDE_TRACE_MEMORY", OptionType::kUInt, "256",
               "MiB of trace buffers in all threads of a process together (1 to 65536); events "
               "beyond are dropped and counted, with a note naming this variable.",
               1, 65536},
    OptionSpec{"SONDE_FLUSH_INTERVAL", OptionType::kSeconds, "10",
               "Seconds between periodic flushes: 0 (only at exit, exec and fatal signals) or "
               "0.1 to 1000000. A crash loses at most this much. A process's first comes "
               "after 1 s, or this, when shorter.",
               0.1, 1e6, true},
    OptionSpec{"SONDE_DELAY", OptionType::kSeconds, "0",
               "Collection window (or `sonde run --delay S`, `python3 -m sonde --delay S`): "
               "nothing is measured (native calls, Python frames, regions, samples, GPU "
               "activity) until S seconds after the launch (0 or 0.001 to 1000000); from then "
               "on every call is counted exactly. Under `sonde run` the launch is `sonde run`'s "
               "start, one deadline for every process of the run (exec'd children, MPI ranks "
               "each under their own `sonde run`); set by hand with `LD_PRELOAD`, each process "
               "counts S from its own start. The process's `started_ns` is the window's "
               "opening, so percentages of wall time are of the window.",
               0.001, 1e6, true},
    OptionSpec{"SONDE_DELAY_UNTIL", OptionType::kText, "",
               "Set by `sonde run --delay S`: the window's deadline, nanoseconds since the "
               "epoch (CLOCK_REALTIME), which the run's processes share; not for users.",
               0, 0, false, OptionReader::kLibrary, true},
    OptionSpec{"SONDE_STEPS", OptionType::kUInt, "0",
               "Collection window by iterations (or `--steps N`): nothing is measured until "
               "the region named by `SONDE_STEP_REGION` begins for the (N+1)-th time in the "
               "process (`sonde.region`, `sonde_region_begin`, an NVTX range or a torch "
               "`record_function` of that name, on any thread); that step and everything after "
               "it are recorded. 0 (off) or 1 to 1000000000; with `SONDE_DELAY` too, the steps "
               "decide. A run whose window never opened says so in a note.",
               1, 1e9, true},
    OptionSpec{"SONDE_STEP_REGION", OptionType::kText, "step",
               "The region `SONDE_STEPS` counts, by its exact name."},
    OptionSpec{"SONDE_COUNTERS", OptionType::kList, "",
               "Comma-separated PAPI events (presets or native, e.g. "
               "`perf::PAGE-FAULTS,perf::TASK-CLOCK`; at most 4) counted per call path, "
               "inclusive and exclusive, into `node_counters`. An event that does not exist "
               "here is reported once, with PAPI's reason, and skipped. Where PAPI's perf_event "
               "component is disabled (libpfm4 knows no PMU for this CPU, e.g. AMD Zen 5 with "
               "Debian 12's libpfm4), the kernel's software events (`perf::TASK-CLOCK`, "
               "`PAGE-FAULTS`, `CONTEXT-SWITCHES`, `CPU-MIGRATIONS`, `MINOR-FAULTS`, "
               "`MAJOR-FAULTS`, `CPU-CLOCK`) are read with `perf_event_open` instead, and a "
               "note says so. Reading counters costs a system call per enter and exit for "
               "software events. Not recorded in fork children."},
    OptionSpec{"SONDE_PYTHON", OptionType::kBool, "1",
               "`0`: child interpreters of a `python3 -m sonde` run do not start the Python "
               "hook.",
               0, 0, false, OptionReader::kPython},
    OptionSpec{"SONDE_PYTHON_BUILTINS", OptionType::kBool, "0",
               "`1` (or `python3 -m sonde --builtins`): the Python hook also records C "
               "functions (builtins, `numpy.dot`) through CPython's profile function, at about "
               "4 times the cost per Python call (on 3.12+ through sys.monitoring's CALL "
               "event); `0`: Python frames only, through CPython's frame-evaluation hook on "
               "3.10 and 3.11 (sys.monitoring on 3.12+; docs/python.md).",
               0, 0, false, OptionReader::kPython},
    OptionSpec{"SONDE_PYTHON_IMPORTS", OptionType::kBool, "0",
               "`1` (or `python3 -m sonde --imports`): the Python frames an import runs (module "
               "bodies and what they call) are recorded beneath its `<import>` node; `0`: each "
               "import is one `<import>` node with its time, which keeps the thousands of "
               "paths of a large import (`import torch`: about 24,000) and their cost out of "
               "the profile (docs/python.md).",
               0, 0, false, OptionReader::kPython},
    OptionSpec{"SONDE_IN_PROCESS", OptionType::kBool, "1",
               "For `python3 -m sonde` only: unset (or `--in-process`, `1`) loads libsonde into "
               "the running interpreter; `0` (or `--re-exec`) starts the program in a second "
               "one under `sonde run`, at about three times the start-up cost. Where the "
               "in-process launch must fall back (a library loaded before sonde), the "
               "profile's `launch` note says why, and stderr too when `1` or `--in-process` "
               "asked for it; `-s` uses `sonde run` by design (its report is that one's), "
               "without a note (docs/python.md).",
               0, 0, false, OptionReader::kPython},
    OptionSpec{"SONDE_PEAKS", OptionType::kPath, "~/.cache/sonde/peaks.txt",
               "Peak rates (from `sonde calibrate`, or by hand: lines `resource threads value "
               "source`) copied into each profile, for `pct_peak`. "
               "`$XDG_CACHE_HOME/sonde/peaks.txt` when that is set."},
    OptionSpec{"SONDE_LOG", OptionType::kLevel, "warn",
               "`quiet`, `warn`, `info` or `debug`. Unset, a process that joins a run (a child, "
               "an exec'd image) says nothing on a stderr that is not a terminal, since the "
               "program that started it may read that stream; its warnings are in the "
               "profile's notes (`sonde report` shows them)."},
    OptionSpec{"SONDE_MAX_DEPTH", OptionType::kUInt, "1024",
               "Deepest call path recorded (2 to 65536); deeper calls are charged to the "
               "deepest frame and noted in the file. A thread's stack of open frames has "
               "room for 256 at first and grows to this as a recursion goes deeper.",
               2, 65536},
    OptionSpec{"SONDE_SAMPLE_HZ", OptionType::kUInt, "0",
               "Samples per second of each thread's CPU time (or `sonde run --sample N`): 0 "
               "(off) or 1 to 10000. Each sample records the shadow stack's current node and "
               "the native frames below it (libunwind) into `samples`, apart from the exact "
               "figures; `sonde tree` and `report` show them marked as sampled.",
               1, 10000, true},
    OptionSpec{"SONDE_ADAPTIVE", OptionType::kUInt, "0",
               "Adaptive timing of tiny hot routines (or `sonde run --adaptive`): 0 (off), `1` "
               "(time 1 call in 16) or N from 2 to 1024 (1 call in N, rounded down to a power "
               "of two). Counts stay exact; a call path whose first 10,000 calls have a median "
               "under 1 us is then timed on a random sample of its calls, its times scaled and "
               "their standard error written to `node_timing`. Ignored with `SONDE_TRACE` or "
               "`SONDE_COUNTERS`. See docs/performance.md.",
               1, 1024, true},
    OptionSpec{"SONDE_RECORD_ARGS", OptionType::kBool, "1",
               "`0` (or `sonde run --no-record-args`): the profile records the program's name "
               "only, not its arguments. With `1`, the values of arguments whose name looks "
               "secret (`--password=...`, `--api-key ...`, `TOKEN=...`: a name containing "
               "TOKEN, SECRET, KEY, PASSWORD, PASS, CREDENTIAL or AUTH) are recorded as "
               "`<redacted>`, and so are passwords in URLs (`scheme://user:<redacted>@host`)."},
    OptionSpec{"SONDE_FTZ", OptionType::kBool, "0",
               "`1` sets flush-to-zero and denormals-are-zero (MXCSR FTZ and DAZ) in every thread "
               "sonde sees, from its first instruction: the loading thread in the library's "
               "constructor, every later thread as it starts. Subnormal float results become "
               "0, which can be much faster and can change a program's numbers; `sonde tune`'s "
               "`ftz` stage sets it and compares the output."},
    OptionSpec{"SONDE_TORCH_THREADS", OptionType::kUInt, "0",
               "`N` from 1 to 65535 holds PyTorch's intra-op pool at N threads, even against "
               "the program's own `torch.set_num_threads` (which wins over `OMP_NUM_THREADS`): "
               "`sonde tune`'s `framework-threads` stage sets it to the cores. 0: off.",
               1, 65535, true, OptionReader::kPython},
    OptionSpec{"SONDE_TORCH_OPS", OptionType::kBool, "1",
               "In Python processes of a `python3 -m sonde` run (its hook) that import PyTorch "
               "(1.13, 2.x): ATen operators, autograd nodes and torch.distributed's collectives "
               "are recorded through PyTorch's operator observer (RecordFunction), as frames of "
               "kind `torch` and rows of `comm_ops`. `0` turns it off. See docs/torch.md.",
               0, 0, false, OptionReader::kPython},
    OptionSpec{"SONDE_TORCH_SHAPES", OptionType::kBool, "0",
               "With `SONDE_TORCH_OPS`: `1` (or `python3 -m sonde --record-shapes`) also records "
               "each top-level operator's input shapes and dtypes per call path, as "
               "torch.profiler's `record_shapes` (table `op_shapes`, view `operator_shapes`, "
               "`sonde shapes`). libtorch then copies every operator's inputs: about 1 us an "
               "operator. See docs/torch.md.",
               0, 0, false, OptionReader::kPython},
    OptionSpec{"SONDE_CUPTI_LIBRARY", OptionType::kPath, "<the runtime's libcupti.so.N>",
               "In processes that use CUDA: the CUPTI library to load (default: the "
               "`libcupti.so.12` or `.13` of the CUDA runtime the program loaded, beside it "
               "first (pip's `nvidia/cuda_cupti/lib`, a toolkit's `extras/CUPTI/lib64`), then "
               "the loader's search and `/usr/local/cuda`). See docs/gpu.md."},
    OptionSpec{"SONDE_GPU_METRICS", OptionType::kList, "",
               "Comma-separated CUPTI metrics counted per kernel launch through CUPTI's range "
               "profiler (e.g. `smsp__inst_executed.sum,sm__throughput.avg.pct_of_peak_"
               "sustained_elapsed`); `tau` stands for the three counts of TAU's warps per "
               "instruction and global loads per instruction. Values go to `gpu_metrics`; "
               "`gpu_kernels`, `sonde metrics --section kernels` and the `gpu-kernel` "
               "candidate rule use them. Kernels are replayed and serialised while metrics are "
               "taken, so time a run without it. Unknown metrics are reported once and "
               "skipped. See docs/gpu.md."},
    OptionSpec{"SONDE_LIBRARY", OptionType::kPath, "<sonde>/../lib/libsonde.so",
               "For `sonde run` and `python3 -m sonde` only: the preload library to use.", 0, 0,
               false, OptionReader::kLauncher},
    OptionSpec{"SONDE_VIEWER_DIR", OptionType::kPath, "<sonde>/../share/sonde/viewer",
               "For `sonde view` only: the folder of the browser viewer's built files "
               "(`index.html`, `app.js`, `app.css`). By default `<build>/viewer/dist` beside a "
               "build tree's `sonde`, else the installed copy.",
               0, 0, false, OptionReader::kLauncher},
    OptionSpec{"SONDE_RUN_ID", OptionType::kText, "",
               "Set by sonde so that child processes join their parent's run; not for users.", 0, 0,
               false, OptionReader::kLibrary, true},
    OptionSpec{"SONDE_PROCESS", OptionType::kText, "",
               "Set by sonde: `pid:process_id` of the process a fork or exec child comes from; "
               "not for users.",
               0, 0, false, OptionReader::kLibrary, true},
    OptionSpec{"SONDE_EXEC_OF", OptionType::kText, "",
               "Set by sonde for one exec: `pid:process_id` of the image it replaces; not for "
               "users.",
               0, 0, false, OptionReader::kLibrary, true},
    OptionSpec{"SONDE_SAY_WRITTEN", OptionType::kText, "",
               "Set by sonde for one exec of `python3 -m sonde`'s in-process program: the "
               "output's name, which the new image says at its exit; not for users.",
               0, 0, false, OptionReader::kLibrary, true},
    OptionSpec{"SONDE_UNPROFILED", OptionType::kText, "",
               "Set by sonde in a process that could not write its profile (a full disk, a "
               "read-only folder): the file's full path, so that the processes it starts for "
               "the same file run unprofiled without saying why again; not for users.",
               0, 0, false, OptionReader::kLibrary, true},
    OptionSpec{"SONDE_PYTHON_LAUNCHED", OptionType::kBool, "",
               "Set by `python3 -m sonde` for the interpreter it re-executes; not for users.", 0, 0,
               false, OptionReader::kPython, true},
    OptionSpec{"SONDE_PYTHON_NOT_IN_PROCESS", OptionType::kText, "",
               "Set by `python3 -m sonde` for the interpreter it re-executes where the "
               "in-process launch could not be used: why, for the profile's `launch` note; not "
               "for users.",
               0, 0, false, OptionReader::kPython, true},
};

}  // namespace sonde
