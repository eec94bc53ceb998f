/* What numpy's extension does with its wheel's BLAS: calls through its PLT to the names that
 * library defines (wheel_blas.c), linked against it as numpy's _multiarray_umath is against its
 * bundled OpenBLAS. Loaded by ctypes (RTLD_LOCAL, as Python loads an extension) or linked into
 * wheel_blas_main. Prints nothing; returns a checksum of every result. */
#include <stdint.h>
#include <stdlib.h>

enum { kRowMajor = 101, kNoTrans = 111 };

void cblas_sgemm64_(int, int, int, int64_t, int64_t, int64_t, float, const float*, int64_t,
                    const float*, int64_t, float, float*, int64_t);
void scipy_cblas_sgemm64_(int, int, int, int64_t, int64_t, int64_t, float, const float*, int64_t,
                          const float*, int64_t, float, float*, int64_t);
void scipy_cblas_dgemm64_(int, int, int, int64_t, int64_t, int64_t, double, const double*, int64_t,
                          const double*, int64_t, double, double*, int64_t);
void scipy_cblas_sgemm(int, int, int, int, int, int, float, const float*, int, const float*, int,
                       float, float*, int);
float scipy_cblas_sdot64_(int64_t, const float*, int64_t, const float*, int64_t);
void scipy_sgemm_64_(const char*, const char*, const int64_t*, const int64_t*, const int64_t*,
                     const float*, const float*, const int64_t*, const float*, const int64_t*,
                     const float*, float*, const int64_t*, size_t, size_t);

/* reps products of each kind: an (m x k) by (k x n) product in every naming, a dot of length
 * m * k, and the Fortran sgemm with m and n swapped (column-major). */
double run_products(int64_t m, int64_t n, int64_t k, int reps) {
  float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n),
        *c = malloc(sizeof(float) * m * n);
  double *ad = malloc(sizeof(double) * m * k), *bd = malloc(sizeof(double) * k * n),
         *cd = malloc(sizeof(double) * m * n);
  for (int64_t i = 0; i < m * k; ++i) ad[i] = a[i] = (float)((i % 7) - 3) / 4;
  for (int64_t i = 0; i < k * n; ++i) bd[i] = b[i] = (float)((i % 5) - 2) / 2;
  double sum = 0;
  float one = 1, zero = 0;
  for (int r = 0; r < reps; ++r) {
    cblas_sgemm64_(kRowMajor, kNoTrans, kNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
    sum += c[0] + c[m * n - 1];
    scipy_cblas_sgemm64_(kRowMajor, kNoTrans, kNoTrans, m, n, k, 1, a, k, b, n, 0, c, n);
    sum += c[1] + c[m * n / 2];
    scipy_cblas_dgemm64_(kRowMajor, kNoTrans, kNoTrans, m, n, k, 1, ad, k, bd, n, 0, cd, n);
    sum += cd[0] + cd[m * n - 1];
    scipy_cblas_sgemm(kRowMajor, kNoTrans, kNoTrans, (int)m, (int)n, (int)k, 1, a, (int)k, b,
                      (int)n, 0, c, (int)n);
    sum += c[2];
    sum += scipy_cblas_sdot64_(m * k, a, 1, a, 1);
    /* Column-major C^T = B^T A^T: the same product through the Fortran entry. */
    scipy_sgemm_64_("N", "N", &n, &m, &k, &one, b, &n, a, &k, &zero, c, &n, 1, 1);
    sum += c[3];
  }
  free(a), free(b), free(c), free(ad), free(bd), free(cd);
  return sum;
}
