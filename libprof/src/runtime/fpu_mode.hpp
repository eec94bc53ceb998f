// SONDE_FTZ: flush-to-zero and denormals-are-zero in every thread sonde sees, so that a program
// can be tried with subnormals off without a line of its own changed (`sonde tune`'s ftz stage).
#pragma once

namespace sonde {

// Decided once: from the runtime's parsed configuration, or from the environment when a thread
// starts before the runtime exists. Sets MXCSR FTZ|DAZ on the calling thread when asked for.
// No lock, allocation or system call after the first decision.
void apply_fpu_mode();

// The runtime's parse, which wins over an earlier look at the environment (the same variable).
void set_fpu_mode(bool ftz);

}  // namespace sonde
