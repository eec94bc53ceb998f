/* A BLAS stand-in whose cost is known: cblas_dgemm spins for M microseconds. It lets the tests
 * check that sonde reports a routine's time within a few percent of the truth. */
#include <time.h>

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* What the calls really took, measured inside the routine: on a loaded machine a spin can
 * overrun its deadline, so the truth is this figure, not M. */
static double elapsed_us;

/* The Fortran entry point does the work and cblas_dgemm calls it, through the PLT, as the
 * reference CBLAS does: under sonde that inner call must not count as a second call. */
void dgemm_(const char* ta, const char* tb, const int* m, const int* n, const int* k,
            const double* alpha, const double* a, const int* lda, const double* b, const int* ldb,
            const double* beta, double* c, const int* ldc) {
  double start = now_us(), until = start + *m, t;
  while ((t = now_us()) < until) {
  }
  elapsed_us += t - start;
  if (c) c[0] = (double)*n * *k;
}

void cblas_dgemm(int layout, int ta, int tb, int m, int n, int k, double alpha, const double* a,
                 int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  dgemm_("N", "N", &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
}

/* The single-precision form costs the same: M microseconds (for `sonde calibrate --blas`). */
void cblas_sgemm(int layout, int ta, int tb, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  double start = now_us(), until = start + m, t;
  while ((t = now_us()) < until) {
  }
  elapsed_us += t - start;
  if (c) c[0] = (float)n * k;
}

double fake_blas_elapsed_us(void) { return elapsed_us; }
