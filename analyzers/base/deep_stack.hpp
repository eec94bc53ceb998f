// A stack for the walks over a profile's call tree: some are recursive (the iteration
// breakdown's, among others), one frame per level, and a path may be as deep as SONDE_MAX_DEPTH
// allows (65,536). On a thread's 8 MiB, a 60,000-deep Python recursion killed `sonde view` with
// SIGSEGV where the wheel's build made those frames larger (a red-team find); the other
// commands had been a few frames from it.
#pragma once

#include <functional>

namespace sonde::analyzers {

// What a deep walk may use: reserved address space, of which only what is touched is memory.
inline constexpr unsigned long kDeepStackBytes = 256ul << 20;

// Runs `work` to its end on a thread of kDeepStackBytes of stack, and rethrows what it threw;
// where no such thread can be had (a `ulimit -v`), on the calling thread.
void on_deep_stack(const std::function<void()>& work);

}  // namespace sonde::analyzers
