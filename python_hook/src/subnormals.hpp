// Subnormal (denormal) values in the float arrays a Python function is called with: the
// element-wise work of an optimizer's update (numpy's Adam on moments that underflowed) never
// reaches a BLAS call, where libsonde's own check looks, so the frame hook looks at a sample of
// calls instead. What it finds is the `subnormals` rule's evidence (docs/metrics.md).
#pragma once

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdint>

#include "sonde/probe.hpp"

namespace sonde::python {

// One call in kSubnormalSampleEvery per thread is checked, on average.
inline constexpr unsigned kSubnormalSampleEvery = 32;

// True on the calls to check: a thread-local countdown, nothing else on the hot path. The gap
// to the next check is drawn anew each time (uniform over 0 .. 2 x 31 calls skipped, mean 31):
// a fixed gap aliases with a training loop whose calls per step share a factor with it, and
// checks the same parameter's arrays every step while the others are never looked at.
inline bool subnormal_sample_due() {
  static thread_local unsigned countdown = 0;
  static thread_local std::uint32_t state = 0;
  if (countdown != 0) {
    --countdown;
    return false;
  }
  if (state == 0)  // a different stream per thread; xorshift32 never returns to 0
    state = 0x9E3779B9u ^ static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(&state));
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  countdown = state % (2 * kSubnormalSampleEvery - 1);
  return true;
}

// The frame slots that hold a call's arguments: positional, keyword-only, *args, **kwargs.
int argument_slots(PyCodeObject* code);

// Checks up to 128 elements, evenly spread, of each float32/float64 buffer among `args` (and
// among the values of a dict or the items of a list or tuple argument, one level down), weighs
// each by its array's size, and keeps per routine the share of subnormal elements: run_info
// `python.subnormal:ROUTINE` = "SHARE FLAGGED_CALLS SAMPLED_CALLS", and a `denormals` note
// naming ROUTINE once any was found. Holds the GIL; leaves no Python exception set.
//
// Subnormal values found at the call's start are judged at its end: an argument the call
// filled (np.ones is np.empty, then copyto into it: memory that held small integers reads as
// subnormal floats) holds other values by then, and was never an operand; the arrays still
// subnormal when the call ends are counted. Returns true when the verdict waits: the caller
// calls settle_subnormal_arguments(key) as the frame `key` ends (a return, a yield, an error).
bool check_subnormal_arguments(RoutineId routine, PyCodeObject* code, PyObject* const* args,
                               int nargs, const void* key);
// The call of frame `key` ended: its flagged arrays are checked again and the call recorded.
// Returns the key of the innermost call still waiting (nullptr: none). Keeps any exception set.
const void* settle_subnormal_arguments(const void* key);
#if PY_VERSION_HEX >= 0x030C0000
// The same for the function sys.monitoring's PY_START reports, read from its frame; the key is
// returned (nullptr: nothing waits).
const void* check_subnormal_arguments_of_current_frame(RoutineId routine, PyCodeObject* code);
#endif

}  // namespace sonde::python
