// Expands cuda_routines.def into the interposed CUDA runtime and driver functions and their
// routines. libsonde is not linked against libcudart or libcuda: each real function is looked up
// at its first call, so programs without CUDA load sonde unchanged.
//
// These wrappers see only a dynamically linked runtime and direct driver calls. When CUPTI's
// callback API records the runtime and driver (which also sees a statically linked runtime and
// cuGetProcAddress), they forward without measuring, so no call is counted twice.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <string>

#include "../intercept.hpp"
#include "cuda_models.hpp"
#include "sonde/gpu.hpp"

namespace {

using sonde::cuda::CopyDir;
namespace cuda = sonde::cuda;

static_assert(int(cudaMemcpyHostToHost) == int(CopyDir::kHtoH) &&
                  int(cudaMemcpyHostToDevice) == int(CopyDir::kHtoD) &&
                  int(cudaMemcpyDeviceToHost) == int(CopyDir::kDtoH) &&
                  int(cudaMemcpyDeviceToDevice) == int(CopyDir::kDtoD) &&
                  int(cudaMemcpyDefault) == int(CopyDir::kDefault),
              "CopyDir follows cudaMemcpyKind");

#define SONDE_TABLE "cuda/cuda_routines.def"  // relative to wrapper_table.inc
#define SONDE_CUDA(NAME, ...) SONDE_TABLE_ROW(NAME)
#define SONDE_CUDA_COPY(NAME, ...) SONDE_TABLE_ROW(NAME)
#include "../wrapper_table.inc"
#undef SONDE_CUDA
#undef SONDE_CUDA_COPY
#undef SONDE_TABLE

// Per entry: its routine, or for a runtime copy one routine per direction (index: CopyDir).
std::array<std::array<sonde::RoutineId, cuda::kCopyDirs>, kCount> g_ids{};

inline sonde::RoutineChoice choose(Entry e) {
  return {sonde::gpu_api_traced_by_cupti() ? 0 : g_ids[size_t(e)][0]};
}

inline sonde::RoutineChoice choose_copy(Entry e, cudaMemcpyKind kind) {
  return {sonde::gpu_api_traced_by_cupti() ? 0 : g_ids[size_t(e)][size_t(cuda::copy_dir(kind))]};
}

__attribute__((constructor(200))) void register_cuda() {
  sonde::RoutineBatch batch;
  constexpr const char* kKind = sonde::kinds::kCuda;
#define SONDE_CUDA(NAME, ROUTINE, LIBRARY, ROLE, ...) \
  g_ids[size_t(Entry::NAME)][0] =                     \
      sonde::register_routine({ROUTINE, kKind, LIBRARY, "", 0, sonde::DType::kNone, #ROLE});
#define SONDE_CUDA_COPY(NAME, ROUTINE, ...)                                                   \
  for (size_t d = 0; d < cuda::kCopyDirs; ++d) {                                              \
    std::string name = std::string(ROUTINE) + " " + cuda::kCopyDirNames[d];                   \
    g_ids[size_t(Entry::NAME)][d] = sonde::register_routine(                                  \
        {name.c_str(), kKind, "cudart", "", 0, sonde::DType::kNone, cuda::kCopyDirRoles[d]}); \
  }
#include "cuda_routines.def"
#undef SONDE_CUDA
#undef SONDE_CUDA_COPY
}

}  // namespace

// Inside a runtime call, the driver calls it makes are part of it: kSuppress.
#define SONDE_CUDA(NAME, ROUTINE, LIBRARY, ROLE, RET, PARAMS, ARGS, MODEL)         \
  SONDE_INTERCEPT_AS(g_real, ::sonde::Nesting::kSuppress, NAME, RET, PARAMS, ARGS, \
                     choose(Entry::NAME), MODEL)
#define SONDE_CUDA_COPY(NAME, ROUTINE, RET, PARAMS, ARGS, KIND, MODEL)             \
  SONDE_INTERCEPT_AS(g_real, ::sonde::Nesting::kSuppress, NAME, RET, PARAMS, ARGS, \
                     choose_copy(Entry::NAME, KIND), MODEL)
#include "cuda_routines.def"
#undef SONDE_CUDA
#undef SONDE_CUDA_COPY
