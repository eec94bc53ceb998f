// Only the outermost call into one library family is measured. cuBLAS runs its GEMMs through
// cublasLtMatmul (an exported call libsonde intercepts) and cuDNN's legacy entry points may reach
// its graph API: measured twice, those FLOPs would count twice. The families' routines use
// Nesting::kChildren, so calls into other libraries made inside (the CUDA runtime) stay visible
// beneath them; this guard folds calls of the same family into the outer one instead.
#pragma once

#include <cstdint>

#include "core/left_frames.hpp"
#include "sonde/probe.hpp"

namespace sonde {

// Used as the CHOOSE step of SONDE_INTERCEPT_AS: lives for the whole wrapper call (guaranteed
// copy elision), so the depth drops again after the real function returns. `Family` is a tag type,
// one per library family.
template <class Family>
class OutermostCall {
 public:
  // `cfa`: the wrapper's caller's stack address; the default argument is evaluated in the
  // wrapper, where CHOOSE constructs the guard.
  explicit OutermostCall(RoutineId routine, uintptr_t cfa = uintptr_t(__builtin_dwarf_cfa()))
      : id(enter(routine, cfa)) {}
  ~OutermostCall() { --state().depth; }
  OutermostCall(const OutermostCall&) = delete;
  OutermostCall& operator=(const OutermostCall&) = delete;

  const RoutineId id;  // 0 (forward without measuring) inside another call of the family

 private:
  struct State {
    int depth = 0;
    uintptr_t outer = 0;  // the outermost call's guard: an address in its wrapper's frame
  };

  static State& state() {
    // libsonde is preloaded, so the static TLS model is available and costs no function call.
    static thread_local State s __attribute__((tls_model("initial-exec")));
    return s;
  }

  // A call made inside the outermost one has its caller below that call's wrapper frame. One
  // whose caller lies above it, on the same stack, was not: a siglongjmp (or an exception) left
  // the outer call without its destructor (issue 37), and the count starts again, as the
  // shadow stack's does (core/left_frames.hpp).
  RoutineId enter(RoutineId routine, uintptr_t cfa) {
    State& s = state();
    if (__builtin_expect(s.depth != 0, 0) && s.outer < cfa && cfa - s.outer <= kOneStack &&
        !on_alternate_stack()) {
      s.depth = 0;
    }
    if (s.depth++ != 0) return 0;
    s.outer = reinterpret_cast<uintptr_t>(this);
    return routine;
  }
};

}  // namespace sonde
