/* A known sequence of CUDA runtime, driver, cuBLAS, cuBLASLt, cuDNN and NCCL calls, for the GPU
 * wrapper tests: linked against the stub libraries (tests/stubs/gpu), so it runs without a GPU.
 * The runtime and driver calls run outside any region; the library calls and one copy run inside
 * the region "step". test_gpu_wrappers.py holds the expected counts, shapes, FLOPs and bytes.
 * Exit status: the number of calls that did not report success. */
#include <cublasLt.h>
#include <cublas_api.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <nccl.h>
#include <stdio.h>

#include "sonde/sonde.h"

/* The per-thread default-stream forms, which the headers name only under
 * CUDA_API_PER_THREAD_DEFAULT_STREAM. */
cudaError_t cudaMemcpyAsync_ptsz(void*, const void*, size_t, enum cudaMemcpyKind, cudaStream_t);
cudaError_t cudaLaunchKernel_ptsz(const void*, dim3, dim3, void**, size_t, cudaStream_t);
/* What nvcc 13 generates for kernel<<<...>>> (crt/device_functions.h declares them for C++). */
cudaError_t __cudaLaunchKernel(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t, dim3, dim3, void**, size_t, cudaStream_t);
/* Declared for C++ only (its __half is a class); pointers to 16-bit values here. */
cublasStatus_t cublasHgemm(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                           const void*, const void*, int, const void*, int, const void*, void*,
                           int);

cublasStatus_t cublasHgemmBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void* const[], int, const void* const[],
                                  int, const void*, void* const[], int, int);
cublasStatus_t cublasHgemmStridedBatched(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                         int, int, const void*, const void*, int, long long,
                                         const void*, int, long long, const void*, void*, int,
                                         long long, int);

static int failures = 0;
#define CHECK(call)                           \
  do {                                        \
    if ((int)(call) != 0) {                   \
      fprintf(stderr, "failed: %s\n", #call); \
      ++failures;                             \
    }                                         \
  } while (0)

static char host[1 << 16];

static void runtime_and_driver(void) {
  void *da = NULL, *db = NULL, *pinned = NULL;
  CHECK(cudaMalloc(&da, 1 << 16));
  CHECK(cudaMalloc(&db, 1 << 16));
  CHECK(cudaMallocHost(&pinned, 4096));

  CHECK(cudaMemcpy(da, host, 1000, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(db, host, 1000, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(host, da, 500, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(db, da, 64, cudaMemcpyDeviceToDevice));
  CHECK(cudaMemcpy(db, da, 32, cudaMemcpyDefault));
  CHECK(cudaMemcpy(pinned, host, 16, cudaMemcpyHostToHost));
  CHECK(cudaMemcpyAsync(da, host, 256, cudaMemcpyHostToDevice, 0));
  CHECK(cudaMemcpyAsync_ptsz(da, host, 256, cudaMemcpyHostToDevice, 0));
  CHECK(cudaMemcpyAsync(host, da, 128, cudaMemcpyDeviceToHost, 0));
  CHECK(cudaMemcpy2D(da, 128, host, 100, 100, 10, cudaMemcpyHostToDevice));
  CHECK(cudaMemset(da, 0, 4096));
  CHECK(cudaMemsetAsync(da, 0, 128, 0));

  dim3 grid = {4, 1, 1}, block = {128, 1, 1};
  CHECK(cudaLaunchKernel((const void*)host, grid, block, NULL, 0, 0));
  CHECK(cudaLaunchKernel((const void*)host, grid, block, NULL, 0, 0));
  CHECK(cudaLaunchKernel_ptsz((const void*)host, grid, block, NULL, 0, 0));
  CHECK(__cudaLaunchKernel(NULL, grid, block, NULL, 0, 0));
  CHECK(__cudaLaunchKernel_ptsz(NULL, grid, block, NULL, 0, 0));
  cudaLaunchConfig_t config = {0};
  CHECK(cudaLaunchKernelExC(&config, (const void*)host, NULL));
  CHECK(cudaDeviceSynchronize()); /* the stub calls cuCtxSynchronize inside */
  CHECK(cudaStreamSynchronize(0));
  CHECK(cudaStreamSynchronize(0));
  CHECK(cudaEventSynchronize(0));

  CHECK(cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
  CUlaunchConfig cu_config = {0};
  CHECK(cuLaunchKernelEx(&cu_config, NULL, NULL, NULL));
  CUdeviceptr dev = (CUdeviceptr)da;
  CHECK(cuMemcpyHtoD_v2(dev, host, 300));
  CHECK(cuMemcpyDtoH_v2(host, dev, 200));
  CHECK(cuMemcpyDtoD_v2(dev, dev, 100));
  CHECK(cuMemcpyHtoDAsync_v2(dev, host, 50, NULL));
  CHECK(cuMemcpyDtoHAsync_v2(host, dev, 40, NULL));
  CHECK(cuMemcpyDtoDAsync_v2(dev, dev, 30, NULL));
  CHECK(cuCtxSynchronize());
  CHECK(cuStreamSynchronize(NULL));

  CHECK(cudaFree(da));
  CHECK(cudaFree(db));
  CHECK(cudaFreeHost(pinned));
}

static void gemms(void) {
  cublasHandle_t h;
  CHECK(cublasCreate_v2(&h));
  const float f_zero = 0, f_one = 1;
  const double d_one = 1;
  const cuDoubleComplex z_zero = {0, 0};
  const unsigned short h_zero = 0x8000; /* -0.0 in half precision: zero */
  static float A[1 << 14], B[1 << 14], C[1 << 14];

  CHECK(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_T, 64, 32, 16, &f_one, A, 64, B, 32, &f_zero, C,
                       64));
  CHECK(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_T, 64, 32, 16, &f_one, A, 64, B, 32, &f_zero, C,
                       64));
  CHECK(cublasDgemm_v2(h, CUBLAS_OP_T, CUBLAS_OP_N, 8, 8, 8, &d_one, (double*)A, 8, (double*)B, 8,
                       &d_one, (double*)C, 8));
  CHECK(cublasZgemm_v2(h, CUBLAS_OP_C, CUBLAS_OP_N, 4, 4, 4, &z_zero, (cuDoubleComplex*)A, 4,
                       (cuDoubleComplex*)B, 4, &z_zero, (cuDoubleComplex*)C, 4));
  CHECK(
      cublasHgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, 16, 16, 16, &h_zero, A, 16, B, 16, &h_zero, C, 16));
  CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 128, 64, 32, &f_one, A, CUDA_R_16BF, 128, B,
                     CUDA_R_16BF, 32, &f_zero, C, CUDA_R_32F, 128, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT));
  CHECK(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 10, 20, 30, &f_one, A, 10, 300, B,
                                  30, 600, &f_zero, C, 10, 200, 5));
  const float* As[7] = {A, A, A, A, A, A, A};
  const float* Bs[7] = {B, B, B, B, B, B, B};
  float* Cs[7] = {C, C, C, C, C, C, C};
  CHECK(cublasSgemmBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 3, 4, &f_one, As, 2, Bs, 4, &f_zero, Cs,
                           2, 7));
  CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 8, 8, 8, &h_zero, A, CUDA_R_16F, 8,
                                   64, B, CUDA_R_16F, 8, 64, &h_zero, C, CUDA_R_16F, 8, 64, 3,
                                   CUBLAS_COMPUTE_16F, CUBLAS_GEMM_DEFAULT));
  const void* Av[2] = {A, A};
  const void* Bv[2] = {B, B};
  void* Cv[2] = {C, C};
  CHECK(cublasGemmBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &f_one, Av, CUDA_R_32F, 4, Bv,
                            CUDA_R_32F, 4, &f_zero, Cv, CUDA_R_32F, 4, 2, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
  /* The ILP64 forms: sizes past 2^31 (the stub computes nothing). */
  CHECK(cublasSgemm_v2_64(h, CUBLAS_OP_N, CUBLAS_OP_N, 3000000000LL, 2, 2, &f_one, A, 1, B, 2,
                          &f_zero, C, 1));
  CHECK(cublasGemmStridedBatchedEx_64(h, CUBLAS_OP_T, CUBLAS_OP_N, 8, 8, 8, &f_one, A, CUDA_R_32F,
                                      8, 64, B, CUDA_R_32F, 8, 64, &f_one, C, CUDA_R_32F, 8, 64, 2,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  /* What PyTorch also calls: SgemmEx (fp16 in, fp32 out), half and complex batches, and a
   * grouped GEMM of two groups (3 GEMMs of 8x4x2 with beta 0, 2 of 16x16x16 with beta 1). */
  CHECK(cublasSgemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 32, 16, 8, &f_one, A, CUDA_R_16F, 32, B,
                      CUDA_R_16F, 8, &f_zero, C, CUDA_R_32F, 32));
  const void* Hs[4] = {A, A, A, A};
  void* HCs[4] = {C, C, C, C};
  CHECK(cublasHgemmBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, 4, 4, 4, &h_zero, Hs, 4, Hs, 4, &h_zero,
                           HCs, 4, 4));
  CHECK(cublasHgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 6, 6, 6, &h_zero, A, 6, 36, B, 6, 36,
                                  &h_zero, C, 6, 36, 2));
  const cuComplex c_zero = {0, 0};
  CHECK(cublasCgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &c_zero, (cuComplex*)A, 4,
                                  16, (cuComplex*)B, 4, 16, &c_zero, (cuComplex*)C, 4, 16, 3));
  const cublasOperation_t ops[2] = {CUBLAS_OP_N, CUBLAS_OP_T};
  const int gm[2] = {8, 16}, gn[2] = {4, 16}, gk[2] = {2, 16}, gsize[2] = {3, 2};
  const float galpha[2] = {1, 1}, gbeta[2] = {0, 1};
  const void* Ag[5] = {A, A, A, A, A};
  void* Cg[5] = {C, C, C, C, C};
  CHECK(cublasGemmGroupedBatchedEx(h, ops, ops, gm, gn, gk, galpha, Ag, CUDA_R_32F, gm, Ag,
                                   CUDA_R_32F, gk, gbeta, Cg, CUDA_R_32F, gm, 2, gsize,
                                   CUBLAS_COMPUTE_32F));
  /* beta in device memory: sonde cannot read it, so C counts as read. */
  CHECK(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_DEVICE));
  CHECK(cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &f_one, A, 2, B, 2, &f_zero, C, 2));
  CHECK(cublasSetPointerMode_v2(h, CUBLAS_POINTER_MODE_HOST));
  CHECK(cublasDestroy_v2(h));

  /* cuBLASLt: D (64 x 48) = A^T B, A stored 32 x 64, four batches. */
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  CHECK(cublasLtCreate(&lt));
  CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  int32_t trans = CUBLAS_OP_T;
  CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans));
  CHECK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, 32, 64, 32));
  CHECK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, 32, 48, 32));
  CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, 64, 48, 64));
  int32_t batch = 4;
  cublasLtMatrixLayout_t layouts[3] = {la, lb, lc};
  for (int i = 0; i < 3; ++i) {
    CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                           sizeof batch));
  }
  CHECK(cublasLtMatmul(lt, desc, &f_one, A, la, B, lb, &f_zero, C, lc, C, lc, NULL, NULL, 0, 0));
  CHECK(cublasLtMatrixLayoutDestroy(la));
  CHECK(cublasLtMatrixLayoutDestroy(lb));
  CHECK(cublasLtMatrixLayoutDestroy(lc));
  CHECK(cublasLtMatmulDescDestroy(desc));
  CHECK(cublasLtDestroy(lt));
}

static cudnnBackendDescriptor_t backend(cudnnBackendDescriptorType_t type) {
  cudnnBackendDescriptor_t d = NULL;
  CHECK(cudnnBackendCreateDescriptor(type, &d));
  return d;
}
static void set_desc(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                     cudnnBackendDescriptor_t value) {
  CHECK(cudnnBackendSetAttribute(d, name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value));
}
static cudnnBackendDescriptor_t backend_tensor(int nd, const int64_t* dims, int64_t id) {
  cudnnBackendDescriptor_t t = backend(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int64_t strides[4] = {1, 1, 1, 1};
  for (int i = nd - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
  CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims));
  CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides));
  CHECK(cudnnBackendSetAttribute(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id));
  CHECK(cudnnBackendFinalize(t));
  return t;
}
static cudnnBackendDescriptor_t conv_graph_op(void) {
  const int64_t x[4] = {2, 3, 32, 32}, w[4] = {8, 3, 3, 3}, y[4] = {2, 8, 32, 32};
  cudnnBackendDescriptor_t op = backend(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, backend_tensor(4, x, 1));
  set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, backend_tensor(4, w, 2));
  set_desc(op, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, backend_tensor(4, y, 3));
  CHECK(cudnnBackendFinalize(op));
  return op;
}
static cudnnBackendDescriptor_t matmul_graph_op(void) {
  const int64_t a[3] = {2, 4, 6}, b[3] = {2, 6, 5}, c[3] = {2, 4, 5};
  cudnnBackendDescriptor_t op = backend(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, backend_tensor(3, a, 4));
  set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, backend_tensor(3, b, 5));
  set_desc(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, backend_tensor(3, c, 6));
  CHECK(cudnnBackendFinalize(op));
  return op;
}
/* Operation graph -> engine -> engine config -> execution plan. */
static cudnnBackendDescriptor_t backend_plan(cudnnBackendDescriptor_t op) {
  cudnnBackendDescriptor_t graph = backend(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  set_desc(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, op);
  CHECK(cudnnBackendFinalize(graph));
  cudnnBackendDescriptor_t engine = backend(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  set_desc(engine, CUDNN_ATTR_ENGINE_OPERATION_GRAPH, graph);
  CHECK(cudnnBackendFinalize(engine));
  cudnnBackendDescriptor_t config = backend(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
  set_desc(config, CUDNN_ATTR_ENGINECFG_ENGINE, engine);
  CHECK(cudnnBackendFinalize(config));
  cudnnBackendDescriptor_t plan = backend(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
  set_desc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config);
  CHECK(cudnnBackendFinalize(plan));
  return plan;
}

static void convolutions(void) {
  cudnnHandle_t h;
  CHECK(cudnnCreate(&h));
  const float zero = 0, one = 1;
  static float buf[1 << 16];
  cudnnTensorDescriptor_t x, y, x2, y2, pooled, bias;
  cudnnFilterDescriptor_t w, w2;
  cudnnConvolutionDescriptor_t conv, conv2;
  CHECK(cudnnCreateTensorDescriptor(&x));
  CHECK(cudnnCreateTensorDescriptor(&y));
  CHECK(cudnnCreateTensorDescriptor(&x2));
  CHECK(cudnnCreateTensorDescriptor(&y2));
  CHECK(cudnnCreateTensorDescriptor(&pooled));
  CHECK(cudnnCreateTensorDescriptor(&bias));
  CHECK(cudnnCreateFilterDescriptor(&w));
  CHECK(cudnnCreateFilterDescriptor(&w2));
  CHECK(cudnnCreateConvolutionDescriptor(&conv));
  CHECK(cudnnCreateConvolutionDescriptor(&conv2));

  /* 2 x 3 x 32 x 32 input, 8 filters of 3 x 3 x 3, padding 1, stride 1: 2 x 8 x 32 x 32. */
  CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 32, 32));
  CHECK(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 8, 3, 3, 3));
  CHECK(cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT));
  int n, c, hh, ww;
  CHECK(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &n, &c, &hh, &ww));
  CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hh, ww));
  /* Grouped, strided: 1 x 4 x 8 x 8 input, 6 filters of 2 x 3 x 3 in 2 groups, stride 2. */
  CHECK(cudnnSetTensor4dDescriptor(x2, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 4, 8, 8));
  CHECK(cudnnSetFilter4dDescriptor(w2, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 6, 2, 3, 3));
  CHECK(cudnnSetConvolution2dDescriptor(conv2, 0, 0, 2, 2, 1, 1, CUDNN_CROSS_CORRELATION,
                                        CUDNN_DATA_FLOAT));
  CHECK(cudnnSetConvolutionGroupCount(conv2, 2));
  CHECK(cudnnGetConvolution2dForwardOutputDim(conv2, x2, w2, &n, &c, &hh, &ww));
  CHECK(cudnnSetTensor4dDescriptor(y2, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, hh, ww));
  CHECK(cudnnSetTensor4dDescriptor(pooled, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 8, 16, 16));
  CHECK(cudnnSetTensor4dDescriptor(bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, 8, 1, 1));

  CHECK(cudnnConvolutionForward(h, &one, x, buf, w, buf, conv, CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                NULL, 0, &zero, y, buf));
  CHECK(cudnnConvolutionForward(h, &one, x2, buf, w2, buf, conv2, CUDNN_CONVOLUTION_FWD_ALGO_GEMM,
                                NULL, 0, &zero, y2, buf));
  CHECK(cudnnConvolutionBackwardData(h, &one, w, buf, y, buf, conv,
                                     CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, NULL, 0, &one, x, buf));
  CHECK(cudnnConvolutionBackwardFilter(
      h, &one, x, buf, y, buf, conv, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, NULL, 0, &zero, w, buf));
  CHECK(cudnnConvolutionBiasActivationForward(h, &one, x, buf, w, buf, conv,
                                              CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NULL, 0, &zero, y,
                                              buf, bias, buf, NULL, y, buf));

  CHECK(cudnnPoolingForward(h, NULL, &one, y, buf, &zero, pooled, buf));
  CHECK(cudnnPoolingBackward(h, NULL, &one, pooled, buf, pooled, buf, y, buf, &zero, y, buf));
  CHECK(cudnnActivationForward(h, NULL, &one, y, buf, &zero, y, buf));
  CHECK(cudnnActivationForward(h, NULL, &one, y, buf, &zero, y, buf));
  CHECK(cudnnActivationBackward(h, NULL, &one, y, buf, y, buf, y, buf, &zero, y, buf));
  CHECK(cudnnBatchNormalizationForwardTraining(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, y, buf, y,
                                               buf, bias, buf, buf, 0.1, buf, buf, 1e-5, buf, buf));
  CHECK(cudnnBatchNormalizationForwardInference(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, y, buf, y,
                                                buf, bias, buf, buf, buf, buf, 1e-5));
  CHECK(cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero, y,
                                        buf, y, buf, y, buf, bias, buf, buf, buf, 1e-5, buf, buf));
  /* The Ex forms PyTorch's batch norm calls: y = BN(x) + z, then dx and dz from dy. */
  CHECK(cudnnBatchNormalizationForwardTrainingEx(
      h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, &one, &zero, y,
      buf, y, buf, y, buf, bias, buf, buf, 0.1, buf, buf, 1e-5, buf, buf, NULL, NULL, 0, NULL, 0));
  CHECK(cudnnBatchNormalizationBackwardEx(h, CUDNN_BATCHNORM_SPATIAL_PERSISTENT,
                                          CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, &one, &zero, &one,
                                          &zero, y, buf, y, buf, y, buf, y, buf, y, buf, bias, buf,
                                          buf, buf, buf, 1e-5, buf, buf, NULL, NULL, 0, NULL, 0));
  CHECK(cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, y, buf,
                            &zero, y, buf));
  CHECK(cudnnSoftmaxBackward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, y, buf, y,
                             buf, &zero, y, buf));
  /* The graph API, as cudnn-frontend (PyTorch) drives it: the same forward convolution, run
   * twice from one plan, and a batched matmul 2 x (4 x 6) (6 x 5). */
  cudnnBackendDescriptor_t conv_plan = backend_plan(conv_graph_op());
  cudnnBackendDescriptor_t matmul_plan = backend_plan(matmul_graph_op());
  CHECK(cudnnBackendExecute(h, conv_plan, NULL));
  CHECK(cudnnBackendExecute(h, conv_plan, NULL));
  CHECK(cudnnBackendExecute(h, matmul_plan, NULL));

  cudnnTensorDescriptor_t tensors[6] = {x, y, x2, y2, pooled, bias};
  for (int i = 0; i < 6; ++i) CHECK(cudnnDestroyTensorDescriptor(tensors[i]));
  CHECK(cudnnDestroyFilterDescriptor(w));
  CHECK(cudnnDestroyFilterDescriptor(w2));
  CHECK(cudnnDestroyConvolutionDescriptor(conv));
  CHECK(cudnnDestroyConvolutionDescriptor(conv2));
  CHECK(cudnnDestroy(h));
}

static void collectives(void) {
  static char buf[1 << 14];
  CHECK(ncclAllReduce(buf, buf, 1000, ncclFloat32, ncclSum, NULL, 0));
  CHECK(ncclBroadcast(buf, buf, 10, ncclFloat64, 0, NULL, 0));
  CHECK(ncclReduce(buf, buf, 7, ncclInt8, ncclSum, 0, NULL, 0));
  CHECK(ncclAllGather(buf, buf, 100, ncclBfloat16, NULL, 0));
  CHECK(ncclReduceScatter(buf, buf, 50, ncclFloat16, ncclSum, NULL, 0));
  CHECK(ncclBcast(buf, 6, ncclInt32, 0, NULL, 0));
  CHECK(ncclAlltoAll(buf, buf, 9, ncclUint8, NULL, 0));
  CHECK(ncclGather(buf, buf, 11, ncclFloat32, 0, NULL, 0));
  CHECK(ncclScatter(buf, buf, 13, ncclFloat16, 0, NULL, 0));
  CHECK(ncclSend(buf, 3, ncclInt64, 1, NULL, 0));
  CHECK(ncclRecv(buf, 3, ncclInt64, 1, NULL, 0));
  /* A group (nested once, as libraries do): the two all-reduces run at the outer end. */
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(buf, buf, 500, ncclFloat32, ncclSum, NULL, 0));
  CHECK(ncclGroupStart());
  CHECK(ncclAllReduce(buf, buf, 250, ncclFloat64, ncclSum, NULL, 0));
  CHECK(ncclGroupEnd());
  CHECK(ncclGroupEnd());
}

int main(void) {
  runtime_and_driver();
  sonde_region_begin("step");
  CHECK(cudaMemcpy(host + 1000, host, 1000, cudaMemcpyHostToDevice));
  gemms();
  convolutions();
  collectives();
  sonde_region_end("step");
  printf("gpu_calls: %d failures\n", failures);
  return failures;
}
