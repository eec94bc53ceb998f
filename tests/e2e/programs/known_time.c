/* Known costs: CALLS x cblas_dgemm of M microseconds each (fake_blas.c) inside the region
 * "compute", then the region "sleep" around a nanosleep of SLEEP_MS. Prints what each really
 * took, measured inside, for the test to compare with the profile.
 * Usage: known_time CALLS M_US SLEEP_MS */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sonde/sonde.h"

void cblas_dgemm(int layout, int ta, int tb, int m, int n, int k, double alpha, const double* a,
                 int lda, const double* b, int ldb, double beta, double* c, int ldc);

double fake_blas_elapsed_us(void);

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  int calls = atoi(argv[1]), m = atoi(argv[2]), sleep_ms = atoi(argv[3]);
  double c = 0;
  sonde_region_begin("compute");
  for (int i = 0; i < calls; ++i) cblas_dgemm(102, 111, 111, m, 7, 5, 1.0, 0, m, 0, 5, 0.0, &c, m);
  sonde_region_end("compute");
  sonde_region_begin("sleep");
  struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
  double slept = now_us();
  nanosleep(&ts, NULL);
  slept = now_us() - slept;
  sonde_region_end("sleep");
  printf("c %.0f\n", c);
  printf("dgemm_us %.1f\nsleep_us %.1f\n", fake_blas_elapsed_us(), slept);
  return 0;
}
