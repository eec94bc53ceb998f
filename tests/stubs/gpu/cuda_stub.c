/* Stand-in for libcuda.so.1: the driver calls sonde wraps. */
#include <cuda.h>

CUresult cuInit(unsigned int flags) { return CUDA_SUCCESS; }

#define LAUNCH_P                                                                              \
  CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, \
      unsigned shared, CUstream s, void **params, void **extra
CUresult cuLaunchKernel(LAUNCH_P) { return CUDA_SUCCESS; }
CUresult cuLaunchKernel_ptsz(LAUNCH_P) { return CUDA_SUCCESS; }
CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  return CUDA_SUCCESS;
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** p, void** e) {
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void* s, size_t n) { return CUDA_SUCCESS; }
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void* s, size_t n) { return CUDA_SUCCESS; }
CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) { return CUDA_SUCCESS; }
CUresult cuMemcpyDtoH_v2_ptds(void* d, CUdeviceptr s, size_t n) { return CUDA_SUCCESS; }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { return CUDA_SUCCESS; }
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { return CUDA_SUCCESS; }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, CUstream st) {
  return CUDA_SUCCESS;
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void* s, size_t n, CUstream st) {
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, CUstream st) {
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoHAsync_v2_ptsz(void* d, CUdeviceptr s, size_t n, CUstream st) {
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return CUDA_SUCCESS;
}
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) { return CUDA_SUCCESS; }
CUresult cuCtxSynchronize_v2(CUcontext c) { return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream s) { return CUDA_SUCCESS; }
CUresult cuStreamSynchronize_ptsz(CUstream s) { return CUDA_SUCCESS; }
