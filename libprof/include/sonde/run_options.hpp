// The options of `sonde run` (and of `python3 -m sonde`, which passes them on) that set one
// SONDE_* variable for the command, each declared once: `sonde run`'s parser and help
// (analyzers/cli/run.cpp), the variables the launcher sets (analyzers/programs/launcher.cpp) and
// the Python launcher's (the generated sonde/_options.py) are read from this table. Adding one
// is a row here (and its variable in options.hpp).
#pragma once

#include <array>
#include <string_view>

#include "sonde/options.hpp"

namespace sonde {

struct RunVariableOption {
  std::string_view flag;        // the long option, "--trace"
  std::string_view variable;    // the SONDE_* variable it sets for the command
  std::string_view flag_value;  // a flag sets the variable to this; empty: the option takes a value
  std::string_view help;        // `sonde run --help`
};

inline constexpr std::array kRunVariableOptions{
    RunVariableOption{"--trace", "SONDE_TRACE", "1",
                      "Also record every call as a timed event (SONDE_TRACE=1)"},
    RunVariableOption{"--flush-interval", "SONDE_FLUSH_INTERVAL", "",
                      "Seconds between periodic flushes: 0 (only at exit) or 0.1 to 1e6 "
                      "(SONDE_FLUSH_INTERVAL); another value is a usage error"},
    RunVariableOption{"--no-record-args", "SONDE_RECORD_ARGS", "0",
                      "Record the program's name only, not its arguments (SONDE_RECORD_ARGS=0)"},
    RunVariableOption{"--counters", "SONDE_COUNTERS", "",
                      "Comma-separated PAPI events (SONDE_COUNTERS)"},
    RunVariableOption{"--adaptive", "SONDE_ADAPTIVE", "1",
                      "Time only 1 call in 16 of tiny hot call paths, scaled, counts exact "
                      "(SONDE_ADAPTIVE=1)"},
    RunVariableOption{"--sample", "SONDE_SAMPLE_HZ", "",
                      "Also sample each thread's CPU time N times a second, with native stacks, "
                      "marked as sampled apart from the exact figures (SONDE_SAMPLE_HZ)"},
    RunVariableOption{"--delay", "SONDE_DELAY", "",
                      "Measure nothing until S seconds after this launch (one deadline for "
                      "every process of the run), then every call exactly (SONDE_DELAY)"},
    RunVariableOption{"--steps", "SONDE_STEPS", "",
                      "Measure nothing until N steps have run: the window opens as the region "
                      "named by --step-region begins for the (N+1)-th time (SONDE_STEPS)"},
    RunVariableOption{"--step-region", "SONDE_STEP_REGION", "",
                      "The region --steps counts (default 'step'; SONDE_STEP_REGION)"},
};

// Each option's variable is one options.hpp declares (its type and range hold the value).
constexpr bool run_options_declared() {
  for (const RunVariableOption& o : kRunVariableOptions) {
    bool found = false;
    for (const OptionSpec& s : kOptionSpecs) found = found || s.name == o.variable;
    if (!found) return false;
  }
  return true;
}
static_assert(run_options_declared(), "a sonde run option sets a variable options.hpp lacks");

}  // namespace sonde
