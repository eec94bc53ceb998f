/* The BLAS of pip's numpy and scipy wheels, by its names: numpy 1.22-1.26's openblas64_
 * (cblas_sgemm64_, sgemm_64_: ILP64), numpy 2.x's scipy-openblas64 (scipy_cblas_sgemm64_:
 * ILP64) and scipy's scipy-openblas32 (scipy_cblas_sgemm: LP64). No such wheel can be installed
 * here, so each name forwards to the real OpenBLAS of its integer width: Debian's ILP64 build
 * (libopenblas64.so.0, unsuffixed names, 64-bit blasint) or its LP64 one (libopenblas.so.0),
 * each opened RTLD_LOCAL, as a wheel's bundled copy is kept apart from any other BLAS. The
 * arithmetic is OpenBLAS's; only the names are this file's. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void* real(int ilp64, const char* name) {
  static void* lib[2];
  if (!lib[ilp64]) {
    lib[ilp64] = dlopen(ilp64 ? "libopenblas64.so.0" : "libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib[ilp64]) {
      fprintf(stderr, "wheel_blas: %s\n", dlerror());
      abort();
    }
  }
  void* f = dlsym(lib[ilp64], name);
  if (!f) {
    fprintf(stderr, "wheel_blas: no %s\n", name);
    abort();
  }
  return f;
}

/* One routine under its three wheel names: NAME64_ and scipy_NAME64_ with int64_t blasint,
 * scipy_NAME with int. */
#define GEMM_AS(NAME, S, T, I, ILP64)                                                          \
  void NAME(int l, int ta, int tb, I m, I n, I k, T al, const T* a, I lda, const T* b, I ldb,  \
            T be, T* c, I ldc) {                                                               \
    typedef void (*fn)(int, int, int, I, I, I, T, const T*, I, const T*, I, T, T*, I);         \
    ((fn)real(ILP64, "cblas_" #S "gemm"))(l, ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc); \
  }
#define GEMM(S, T)                                    \
  GEMM_AS(cblas_##S##gemm64_, S, T, int64_t, 1)       \
  GEMM_AS(scipy_cblas_##S##gemm64_, S, T, int64_t, 1) \
  GEMM_AS(scipy_cblas_##S##gemm, S, T, int, 0)
GEMM(s, float)
GEMM(d, double)

typedef float (*sdot64_t)(int64_t, const float*, int64_t, const float*, int64_t);
float cblas_sdot64_(int64_t n, const float* x, int64_t incx, const float* y, int64_t incy) {
  return ((sdot64_t)real(1, "cblas_sdot"))(n, x, incx, y, incy);
}
float scipy_cblas_sdot64_(int64_t n, const float* x, int64_t incx, const float* y, int64_t incy) {
  return ((sdot64_t)real(1, "cblas_sdot"))(n, x, incx, y, incy);
}

/* The Fortran entry: the suffix after the trailing underscore, as OpenBLAS's SYMBOLSUFFIX. */
typedef void (*fsgemm64_t)(const char*, const char*, const int64_t*, const int64_t*, const int64_t*,
                           const float*, const float*, const int64_t*, const float*, const int64_t*,
                           const float*, float*, const int64_t*, size_t, size_t);
void scipy_sgemm_64_(const char* ta, const char* tb, const int64_t* m, const int64_t* n,
                     const int64_t* k, const float* al, const float* a, const int64_t* lda,
                     const float* b, const int64_t* ldb, const float* be, float* c,
                     const int64_t* ldc, size_t lta, size_t ltb) {
  ((fsgemm64_t)real(1, "sgemm_"))(ta, tb, m, n, k, al, a, lda, b, ldb, be, c, ldc, lta, ltb);
}

/* Its thread query and configuration, under the wheel's names. */
int scipy_openblas_get_num_threads64_(void) {
  return ((int (*)(void))real(1, "openblas_get_num_threads"))();
}
const char* scipy_openblas_get_config64_(void) {
  return ((const char* (*)(void))real(1, "openblas_get_config"))();
}
