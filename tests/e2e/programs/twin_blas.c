/* One of two BLAS libraries that define the same name (built twice, TWIN 1 and 2): pip's PyTorch
 * brings MKL inside libtorch_cpu.so while numpy brings its OpenBLAS, two extensions may bring
 * two CUDA runtimes. Each product writes its library's number into C, so the caller can tell
 * which library its call reached. */
#include <stddef.h>

void sgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const float* alpha, const float* a, const int* lda, const float* b, const int* ldb,
            const float* beta, float* c, const int* ldc, size_t la, size_t lb) {
  (void)ta, (void)tb, (void)k, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta;
  (void)la, (void)lb;
  for (int j = 0; j < *n; ++j)
    for (int i = 0; i < *m; ++i) c[(size_t)j * (size_t)*ldc + (size_t)i] = (float)TWIN;
}
