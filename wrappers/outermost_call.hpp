// Only the outermost call into one library family is measured. cuBLAS runs its GEMMs through
// cublasLtMatmul (an exported call libsonde intercepts) and cuDNN's legacy entry points may reach
// its graph API: measured twice, those FLOPs would count twice. The families' routines use
// Nesting::kChildren, so calls into other libraries made inside (the CUDA runtime) stay visible
// beneath them; this guard folds calls of the same family into the outer one instead.
#pragma once

#include "sonde/probe.hpp"

namespace sonde {

// Used as the CHOOSE step of SONDE_INTERCEPT_AS: lives for the whole wrapper call (guaranteed
// copy elision), so the depth drops again after the real function returns. `Family` is a tag type,
// one per library family.
template <class Family>
class OutermostCall {
 public:
  explicit OutermostCall(RoutineId routine) : id(depth()++ == 0 ? routine : 0) {}
  ~OutermostCall() { --depth(); }
  OutermostCall(const OutermostCall&) = delete;
  OutermostCall& operator=(const OutermostCall&) = delete;

  const RoutineId id;  // 0 (forward without measuring) inside another call of the family

 private:
  static int& depth() {
    // libsonde is preloaded, so the static TLS model is available and costs no function call.
    static thread_local int d __attribute__((tls_model("initial-exec"))) = 0;
    return d;
  }
};

}  // namespace sonde
