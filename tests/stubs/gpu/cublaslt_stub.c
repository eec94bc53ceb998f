/* Stand-in for libcublasLt.so.13: descriptors that keep every attribute set on them (with the
 * defaults cuBLASLt documents for those sonde reads), and cublasLtMatmul. */
#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

enum { kSlots = 64, kValueBytes = 16 };

/* One record type for both descriptor kinds: attribute number -> value and its size. */
typedef struct {
  unsigned char value[kSlots][kValueBytes];
  size_t size[kSlots];
} Attributes;

static void put(Attributes* a, int attr, const void* v, size_t n) {
  memcpy(a->value[attr], v, n);
  a->size[attr] = n;
}
static void put_i32(Attributes* a, int attr, int32_t v) { put(a, attr, &v, sizeof v); }

static cublasStatus_t set_attr(Attributes* a, int attr, const void* buf, size_t n) {
  if (a == NULL || attr < 0 || attr >= kSlots || n > kValueBytes || buf == NULL) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  put(a, attr, buf, n);
  return CUBLAS_STATUS_SUCCESS;
}

/* As cuBLASLt: with sizeInBytes 0 only the size is reported; a smaller buffer is an error. */
static cublasStatus_t get_attr(const Attributes* a, int attr, void* buf, size_t n,
                               size_t* written) {
  if (a == NULL || attr < 0 || attr >= kSlots || a->size[attr] == 0) {
    return CUBLAS_STATUS_INVALID_VALUE;
  }
  if (written) *written = a->size[attr];
  if (n == 0 && buf == NULL) return CUBLAS_STATUS_SUCCESS;
  if (n < a->size[attr] || buf == NULL) return CUBLAS_STATUS_INVALID_VALUE;
  memcpy(buf, a->value[attr], a->size[attr]);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) {
  *h = calloc(1, 1);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  free(h);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  Attributes* a = calloc(1, sizeof *a);
  put_i32(a, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, compute);
  put_i32(a, CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale);
  put_i32(a, CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_POINTER_MODE_HOST);
  put_i32(a, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_N);
  put_i32(a, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  *d = (cublasLtMatmulDesc_t)a;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  free(d);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t n) {
  return set_attr((Attributes*)d, attr, buf, n);
}
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t n, size_t* written) {
  return get_attr((const Attributes*)d, attr, buf, n, written);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
  Attributes* a = calloc(1, sizeof *a);
  uint32_t t = (uint32_t)type;
  put(a, CUBLASLT_MATRIX_LAYOUT_TYPE, &t, sizeof t);
  put_i32(a, CUBLASLT_MATRIX_LAYOUT_ORDER, CUBLASLT_ORDER_COL);
  put(a, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows, sizeof rows);
  put(a, CUBLASLT_MATRIX_LAYOUT_COLS, &cols, sizeof cols);
  put(a, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld);
  put_i32(a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, 1);
  int64_t offset = 0;
  put(a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &offset, sizeof offset);
  *l = (cublasLtMatrixLayout_t)a;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  free(l);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr,
                                                const void* buf, size_t n) {
  return set_attr((Attributes*)l, attr, buf, n);
}
cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t attr, void* buf,
                                                size_t n, size_t* written) {
  return get_attr((const Attributes*)l, attr, buf, n, written);
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t ad, const void* B,
                              cublasLtMatrixLayout_t bd, const void* beta, const void* C,
                              cublasLtMatrixLayout_t cd, void* D, cublasLtMatrixLayout_t dd,
                              const cublasLtMatmulAlgo_t* algo, void* ws, size_t wsn,
                              cudaStream_t s) {
  return CUBLAS_STATUS_SUCCESS;
}
