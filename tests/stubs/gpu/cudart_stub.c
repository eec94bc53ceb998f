/* Stand-in for libcudart.so.13: the runtime calls sonde wraps. Device memory is host memory.
 * As libcudart does, it is not linked against the driver: it opens libcuda.so.1 with dlopen at
 * its first call that needs it, so sonde meets the driver through its dlopen hook. Then
 * cudaDeviceSynchronize calls the driver: the tests see a driver call inside a runtime one. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_runtime_cbid.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "cudart_device.h"

static CUresult (*driver_sync)(void);
static int open_driver(void) {
  if (driver_sync == NULL) {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (driver != NULL) driver_sync = (CUresult(*)(void))dlsym(driver, "cuCtxSynchronize");
  }
  return driver_sync != NULL;
}

/* Launches run on the stub's "GPU" (cudart_device.c), reported under CUPTI's callback id for the
 * entry point called. */
cudaError_t cudaLaunchKernel(const void* f, dim3 g, dim3 b, void** a, size_t s, cudaStream_t st) {
  open_driver();
  return stub_device_launch(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, f, g, b, a, s, st);
}
cudaError_t cudaLaunchKernel_ptsz(const void* f, dim3 g, dim3 b, void** a, size_t s,
                                  cudaStream_t st) {
  open_driver();
  return stub_device_launch(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, f, g, b, a, s,
                            st);
}
/* nvcc 13's launch entry points (crt/device_functions.h). */
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t s,
                               cudaStream_t st) {
  open_driver();
  return stub_device_launch(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000, k, g, b, a, s, st);
}
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void** a, size_t s,
                                    cudaStream_t st) {
  open_driver();
  return stub_device_launch(CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_ptsz_v13000, k, g, b, a, s,
                            st);
}
cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* c, const void* f, void** a) {
  return cudaSuccess;
}
cudaError_t cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t* c, const void* f, void** a) {
  return cudaSuccess;
}

#define COPY_P void *dst, const void *src, size_t count, enum cudaMemcpyKind kind
cudaError_t cudaMemcpy(COPY_P) { return cudaSuccess; }
cudaError_t cudaMemcpy_ptds(COPY_P) { return cudaSuccess; }
cudaError_t cudaMemcpyAsync(COPY_P, cudaStream_t s) { return cudaSuccess; }
cudaError_t cudaMemcpyAsync_ptsz(COPY_P, cudaStream_t s) { return cudaSuccess; }
#define COPY2D_P \
  void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, enum cudaMemcpyKind kind
cudaError_t cudaMemcpy2D(COPY2D_P) { return cudaSuccess; }
cudaError_t cudaMemcpy2D_ptds(COPY2D_P) { return cudaSuccess; }
cudaError_t cudaMemcpy2DAsync(COPY2D_P, cudaStream_t s) { return cudaSuccess; }
cudaError_t cudaMemcpy2DAsync_ptsz(COPY2D_P, cudaStream_t s) { return cudaSuccess; }
cudaError_t cudaMemset(void* p, int v, size_t n) { return cudaSuccess; }
cudaError_t cudaMemset_ptds(void* p, int v, size_t n) { return cudaSuccess; }
cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t s) { return cudaSuccess; }
cudaError_t cudaMemsetAsync_ptsz(void* p, int v, size_t n, cudaStream_t s) { return cudaSuccess; }

cudaError_t cudaMalloc(void** p, size_t n) {
  *p = malloc(n ? n : 1);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) {
  free(p);
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t n) { return cudaMalloc(p, n); }
cudaError_t cudaFreeHost(void* p) { return cudaFree(p); }

cudaError_t cudaDeviceSynchronize(void) {
  if (!open_driver()) return cudaErrorInsufficientDriver;
  stub_device_wait_all();
  return driver_sync() == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return stub_device_stream_wait(s); }
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) { return stub_device_stream_wait(s); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return stub_device_event_wait(e); }

/* What examples/cnn_cudnn (cnn_train) calls besides the wrapped entry points: one device. */
cudaError_t cudaGetDeviceCount(int* count) {
  if (!open_driver()) return cudaErrorInsufficientDriver;
  *count = 1;
  return cudaSuccess;
}
const char* cudaGetErrorString(cudaError_t e) {
  return e == cudaSuccess ? "no error" : "stub error";
}
