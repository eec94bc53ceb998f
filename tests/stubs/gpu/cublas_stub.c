/* Stand-in for libcublas.so.13: a handle that keeps its pointer mode, and the GEMMs sonde wraps.
 * Like the real library, cublasGemmEx runs through cublasLtMatmul; cublasSgemm_v2 launches a
 * kernel through the runtime (the real one reaches it through the static runtime, which CUPTI
 * sees): so the tests see a nested call of the same family and one of another library. */
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>

struct cublasContext {
  cublasPointerMode_t mode;
  cudaStream_t stream;
};

cublasStatus_t cublasCreate_v2(cublasHandle_t* h) {
  *h = calloc(1, sizeof(struct cublasContext));
  return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t mode) {
  h->mode = mode;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t stream) {
  h->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t* stream) {
  *stream = h->stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t* mode) {
  *mode = h->mode;
  return CUBLAS_STATUS_SUCCESS;
}

#define GEMM_P(T)                                                                    \
  cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, \
      const T *alpha, const T *A, int lda, const T *B, int ldb, const T *beta, T *C, int ldc
/* The kernel Sgemm launches: its symbol names it in CUPTI's records. */
void cublas_stub_sgemm_kernel(void) {}
cublasStatus_t cublasSgemm_v2(GEMM_P(float)) {
  dim3 one = {1, 1, 1};
  return cudaLaunchKernel((const void*)cublas_stub_sgemm_kernel, one, one, NULL, 0,
                          h ? h->stream : NULL) == cudaSuccess
             ? CUBLAS_STATUS_SUCCESS
             : CUBLAS_STATUS_EXECUTION_FAILED;
}
cublasStatus_t cublasDgemm_v2(GEMM_P(double)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasCgemm_v2(GEMM_P(cuComplex)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasZgemm_v2(GEMM_P(cuDoubleComplex)) { return CUBLAS_STATUS_SUCCESS; }
/* cublas_api.h declares cublasHgemm for C++ only (__half is a C++ class): same ABI, void. */
cublasStatus_t cublasHgemm(GEMM_P(void)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void* alpha, const void* A, cudaDataType at,
                            int lda, const void* B, cudaDataType bt, int ldb, const void* beta,
                            void* C, cudaDataType ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo) {
  return cublasLtMatmul(NULL, NULL, alpha, A, NULL, B, NULL, beta, C, NULL, C, NULL, NULL, NULL, 0,
                        NULL);
}

#define BATCHED_P(T)                                                                           \
  cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,           \
      const T *alpha, const T *const A[], int lda, const T *const B[], int ldb, const T *beta, \
      T *const C[], int ldc, int batch
cublasStatus_t cublasSgemmBatched(BATCHED_P(float)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDgemmBatched(BATCHED_P(double)) { return CUBLAS_STATUS_SUCCESS; }
#define STRIDED_P(T)                                                                        \
  cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,        \
      const T *alpha, const T *A, int lda, long long sa, const T *B, int ldb, long long sb, \
      const T *beta, T *C, int ldc, long long sc, int batch
cublasStatus_t cublasSgemmStridedBatched(STRIDED_P(float)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDgemmStridedBatched(STRIDED_P(double)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                   int m, int n, int k, const void* alpha, const void* const A[],
                                   cudaDataType at, int lda, const void* const B[], cudaDataType bt,
                                   int ldb, const void* beta, void* const C[], cudaDataType ct,
                                   int ldc, int batch, cublasComputeType_t compute,
                                   cublasGemmAlgo_t algo) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType at,
                                          int lda, long long sa, const void* B, cudaDataType bt,
                                          int ldb, long long sb, const void* beta, void* C,
                                          cudaDataType ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return CUBLAS_STATUS_SUCCESS;
}

/* cublas_api.h declares the __half forms for C++ only: the same ABI with void here. */
cublasStatus_t cublasHgemmBatched(BATCHED_P(void)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasHgemmStridedBatched(STRIDED_P(void)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasCgemmStridedBatched(STRIDED_P(cuComplex)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSgemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                             int n, int k, const float* alpha, const void* A, cudaDataType at,
                             int lda, const void* B, cudaDataType bt, int ldb, const float* beta,
                             void* C, cudaDataType ct, int ldc) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmGroupedBatchedEx(cublasHandle_t h, const cublasOperation_t ta[],
                                          const cublasOperation_t tb[], const int m[],
                                          const int n[], const int k[], const void* alpha,
                                          const void* const A[], cudaDataType_t at, const int lda[],
                                          const void* const B[], cudaDataType_t bt, const int ldb[],
                                          const void* beta, void* const C[], cudaDataType_t ct,
                                          const int ldc[], int groups, const int group_size[],
                                          cublasComputeType_t compute) {
  return CUBLAS_STATUS_SUCCESS;
}

/* The ILP64 forms: int64_t sizes. */
#define GEMM64_P(T)                                                                              \
  cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, \
      const T *alpha, const T *A, int64_t lda, const T *B, int64_t ldb, const T *beta, T *C,     \
      int64_t ldc
cublasStatus_t cublasSgemm_v2_64(GEMM64_P(float)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDgemm_v2_64(GEMM64_P(double)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasCgemm_v2_64(GEMM64_P(cuComplex)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasZgemm_v2_64(GEMM64_P(cuDoubleComplex)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasHgemm_64(GEMM64_P(void)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                               int64_t m, int64_t n, int64_t k, const void* alpha, const void* A,
                               cudaDataType at, int64_t lda, const void* B, cudaDataType bt,
                               int64_t ldb, const void* beta, void* C, cudaDataType ct, int64_t ldc,
                               cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return CUBLAS_STATUS_SUCCESS;
}
#define BATCHED64_P(T)                                                                           \
  cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, \
      const T *alpha, const T *const A[], int64_t lda, const T *const B[], int64_t ldb,          \
      const T *beta, T *const C[], int64_t ldc, int64_t batch
cublasStatus_t cublasSgemmBatched_64(BATCHED64_P(float)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDgemmBatched_64(BATCHED64_P(double)) { return CUBLAS_STATUS_SUCCESS; }
#define STRIDED64_P(T)                                                                           \
  cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k, \
      const T *alpha, const T *A, int64_t lda, long long sa, const T *B, int64_t ldb,            \
      long long sb, const T *beta, T *C, int64_t ldc, long long sc, int64_t batch
cublasStatus_t cublasSgemmStridedBatched_64(STRIDED64_P(float)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDgemmStridedBatched_64(STRIDED64_P(double)) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasGemmBatchedEx_64(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                      int64_t m, int64_t n, int64_t k, const void* alpha,
                                      const void* const A[], cudaDataType at, int64_t lda,
                                      const void* const B[], cudaDataType bt, int64_t ldb,
                                      const void* beta, void* const C[], cudaDataType ct,
                                      int64_t ldc, int64_t batch, cublasComputeType_t compute,
                                      cublasGemmAlgo_t algo) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmStridedBatchedEx_64(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
    const void* alpha, const void* A, cudaDataType at, int64_t lda, long long sa, const void* B,
    cudaDataType bt, int64_t ldb, long long sb, const void* beta, void* C, cudaDataType ct,
    int64_t ldc, long long sc, int64_t batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return CUBLAS_STATUS_SUCCESS;
}

/* What examples/cnn_cudnn (cnn_train) calls besides the GEMMs: level-1/2 routines, no-ops. */
cublasStatus_t cublasSgemv_v2(cublasHandle_t h, cublasOperation_t t, int m, int n,
                              const float* alpha, const float* A, int lda, const float* x, int incx,
                              const float* beta, float* y, int incy) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSger_v2(cublasHandle_t h, int m, int n, const float* alpha, const float* x,
                             int incx, const float* y, int incy, float* A, int lda) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSscal_v2(cublasHandle_t h, int n, const float* alpha, float* x, int incx) {
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSaxpy_v2(cublasHandle_t h, int n, const float* alpha, const float* x, int incx,
                              float* y, int incy) {
  return CUBLAS_STATUS_SUCCESS;
}
