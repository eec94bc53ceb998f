// Turns a failed CUDA, cuDNN or cuBLAS call into an exception naming the call and the library's
// own error text; main prints it on one line.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace cnn {

struct GpuError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check(cudaError_t e, const char* call) {
  if (e != cudaSuccess) throw GpuError(std::string(call) + ": " + cudaGetErrorString(e));
}
inline void check(cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS) throw GpuError(std::string(call) + ": " + cudnnGetErrorString(s));
}
inline void check(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw GpuError(std::string(call) + ": cuBLAS status " + std::to_string(int(s)));
}

}  // namespace cnn

#define GPU_CHECK(call) ::cnn::check((call), #call)
