// Expands cublas_routines.def into the interposed cuBLAS and cuBLASLt functions. libsonde is not
// linked against either library: the functions the cost models ask (pointer mode, descriptor
// attributes) are looked up at their first use, so programs without cuBLAS load sonde unchanged.
#include <cublasLt.h>
#include <cublas_api.h>

#include <array>
#include <cstddef>

#include "../blas/blas_models.hpp"
#include "../intercept.hpp"
#include "../outermost_call.hpp"
#include "cublas_models.hpp"

namespace {

namespace cublas = sonde::cublas;

// cuBLAS runs its GEMMs through cublasLtMatmul: one family, so only the outer call is measured.
struct CublasFamily {};
using Outermost = sonde::OutermostCall<CublasFamily>;

#define SONDE_TABLE "cublas/cublas_routines.def"  // relative to wrapper_table.inc
#define SONDE_TABLE_CONSTRUCTOR register_cublas
#define SONDE_CUBLAS(NAME, LIBRARY, DTYPE, ...) \
  SONDE_TABLE_ROW(NAME, {#NAME, sonde::kinds::kCublas, LIBRARY, "", 0, sonde::DType::DTYPE})
#include "../wrapper_table.inc"
#undef SONDE_CUBLAS
#undef SONDE_TABLE_CONSTRUCTOR
#undef SONDE_TABLE

// The query functions, resolved once (null where the library does not define them).
struct Api {
  SONDE_REAL_FUNCTION(pointer_mode, cublasGetPointerMode_v2);
  SONDE_REAL_FUNCTION(desc_attr, cublasLtMatmulDescGetAttribute);
  SONDE_REAL_FUNCTION(layout_attr, cublasLtMatrixLayoutGetAttribute);
};

const Api& api() {
  static const Api a;
  return a;
}

// Whether C is read: beta is not zero. A beta in device memory cannot be read from here, so C
// then counts as read.
bool c_read(cublasHandle_t handle, const void* beta, cublas::Scalar s, bool complex) {
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  const Api& a = api();
  if (a.pointer_mode == nullptr || a.pointer_mode(handle, &mode) != CUBLAS_STATUS_SUCCESS ||
      mode != CUBLAS_POINTER_MODE_HOST) {
    return true;
  }
  return cublas::nonzero(beta, s, complex);
}

// Whether the scalars are host values the model may read (else C counts as read).
bool host_scalars(cublasHandle_t handle) {
  cublasPointerMode_t mode = CUBLAS_POINTER_MODE_HOST;
  const Api& a = api();
  return a.pointer_mode != nullptr && a.pointer_mode(handle, &mode) == CUBLAS_STATUS_SUCCESS &&
         mode == CUBLAS_POINTER_MODE_HOST;
}

// One attribute of `desc` into `out` (left as it is when the library does not answer).
template <class T, class Desc, class Attr>
void attribute(cublasStatus_t (*get)(Desc, Attr, void*, size_t, size_t*), Desc desc, Attr attr,
               T& out) {
  size_t written = 0;
  T v{};
  if (get != nullptr && desc != nullptr &&
      get(desc, attr, &v, sizeof v, &written) == CUBLAS_STATUS_SUCCESS && written == sizeof v) {
    out = v;
  }
}

cublas::Layout layout(cublasLtMatrixLayout_t desc) {
  const Api& a = api();
  uint32_t type = ~0u;
  uint64_t rows = 0, cols = 0;
  int32_t batch = 1;
  attribute(a.layout_attr, desc, CUBLASLT_MATRIX_LAYOUT_TYPE, type);
  attribute(a.layout_attr, desc, CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
  attribute(a.layout_attr, desc, CUBLASLT_MATRIX_LAYOUT_COLS, cols);
  attribute(a.layout_attr, desc, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, batch);
  return {cublas::type_info(cudaDataType(type)), int64_t(rows), int64_t(cols), batch};
}

// cublasLtMatmul: the shape from the layouts, transposes and beta's type from the descriptor.
sonde::CallCost lt_cost(cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
                        cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                        cublasLtMatrixLayout_t d, const void* beta) {
  const Api& q = api();
  int32_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N, mode = CUBLASLT_POINTER_MODE_HOST;
  int32_t scale = CUDA_R_32F;
  attribute(q.desc_attr, desc, CUBLASLT_MATMUL_DESC_TRANSA, ta);
  attribute(q.desc_attr, desc, CUBLASLT_MATMUL_DESC_TRANSB, tb);
  attribute(q.desc_attr, desc, CUBLASLT_MATMUL_DESC_POINTER_MODE, mode);
  attribute(q.desc_attr, desc, CUBLASLT_MATMUL_DESC_SCALE_TYPE, scale);
  cublas::Layout la = layout(a), lb = layout(b), lc = layout(c), ld = layout(d ? d : c);
  bool read_c;
  switch (mode) {
    case CUBLASLT_POINTER_MODE_HOST:
    case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST:
      read_c = cublas::nonzero(beta, cublas::scalar_of(cudaDataType(scale)),
                               cublas::type_info(cudaDataType(scale)).complex);
      break;
    case CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO:
      read_c = false;
      break;
    default:  // beta in device memory
      read_c = true;
  }
  return cublas::lt_matmul(cublas::op_char(ta), cublas::op_char(tb), la, lb, lc, ld, read_c);
}

}  // namespace

// Kernels and runtime calls made inside a cuBLAS call show beneath it: kChildren.
#define SONDE_CUBLAS(NAME, LIBRARY, DTYPE, RET, PARAMS, ARGS, MODEL)               \
  SONDE_INTERCEPT_AS(g_real, ::sonde::Nesting::kChildren, NAME, RET, PARAMS, ARGS, \
                     Outermost(g_ids[size_t(Entry::NAME)]), MODEL)
#include "cublas_routines.def"
#undef SONDE_CUBLAS
