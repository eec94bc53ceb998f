/* The cost models against NVIDIA's own libraries, on a machine without a GPU: descriptors are
 * created and set in the real libcudnn and libcublasLt (which needs no device), then
 * cudnnConvolutionForward and cublasLtMatmul are called with no handle, so they fail at once,
 * after sonde's wrappers have read the real descriptors back. A copy and a synchronisation go to
 * the real libcudart, which reports that there is no driver. What the calls return is printed;
 * the exit status is 0 unless a descriptor could not be set. */
#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>
#include <stdio.h>

static char host[4096];

int main(void) {
  int failures = 0;
  printf("cudaMemcpy %d\n", cudaMemcpy(host + 2048, host, 1000, cudaMemcpyHostToDevice));
  printf("cudaDeviceSynchronize %d\n", cudaDeviceSynchronize());

  /* 2 x 3 x 32 x 32 input, 8 filters of 3 x 3 x 3, padding 1: output 2 x 8 x 32 x 32. */
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
  failures += cudnnCreateTensorDescriptor(&x) != CUDNN_STATUS_SUCCESS;
  failures += cudnnCreateTensorDescriptor(&y) != CUDNN_STATUS_SUCCESS;
  failures += cudnnCreateFilterDescriptor(&w) != CUDNN_STATUS_SUCCESS;
  failures += cudnnCreateConvolutionDescriptor(&conv) != CUDNN_STATUS_SUCCESS;
  failures += cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 3, 32, 32) !=
              CUDNN_STATUS_SUCCESS;
  failures += cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, 8, 3, 3, 3) !=
              CUDNN_STATUS_SUCCESS;
  failures += cudnnSetConvolution2dDescriptor(conv, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                              CUDNN_DATA_FLOAT) != CUDNN_STATUS_SUCCESS;
  failures += cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 2, 8, 32, 32) !=
              CUDNN_STATUS_SUCCESS;
  float one = 1, zero = 0;
  printf("cudnnConvolutionForward %d\n",
         cudnnConvolutionForward(NULL, &one, x, host, w, host, conv,
                                 CUDNN_CONVOLUTION_FWD_ALGO_GEMM, NULL, 0, &zero, y, host));

  /* D (64 x 48) = A^T B, A stored 32 x 64, four batches, half precision. */
  cublasLtMatmulDesc_t desc;
  cublasLtMatrixLayout_t la, lb, lc;
  failures += cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F) != 0;
  int32_t trans = CUBLAS_OP_T, batch = 4;
  failures +=
      cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans, sizeof trans) != 0;
  failures += cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, 32, 64, 32) != 0;
  failures += cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, 32, 48, 32) != 0;
  failures += cublasLtMatrixLayoutCreate(&lc, CUDA_R_16F, 64, 48, 64) != 0;
  cublasLtMatrixLayout_t layouts[3] = {la, lb, lc};
  for (int i = 0; i < 3; ++i) {
    failures += cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                 &batch, sizeof batch) != 0;
  }
  printf("cublasLtMatmul %d\n", cublasLtMatmul(NULL, desc, &one, host, la, host, lb, &zero, host,
                                               lc, host, lc, NULL, NULL, 0, 0));
  printf("descriptor failures %d\n", failures);
  return failures;
}
