/* Known costs: CALLS x cblas_dgemm of M microseconds each (fake_blas.c) inside the region
 * "compute", then the region "sleep" around a nanosleep of SLEEP_MS. Prints what each really
 * took, measured inside, for the test to compare with the profile; and, measured just outside
 * each region, its wall time and (compute) the thread's CPU time, which a loaded machine makes
 * differ from the spin's and the sleep's own figures.
 * Usage: known_time CALLS M_US SLEEP_MS */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sonde/sonde.h"

void cblas_dgemm(int layout, int ta, int tb, int m, int n, int k, double alpha, const double* a,
                 int lda, const double* b, int ldb, double beta, double* c, int ldc);

double fake_blas_elapsed_us(void);

static double clock_us(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static double now_us(void) { return clock_us(CLOCK_MONOTONIC); }

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  int calls = atoi(argv[1]), m = atoi(argv[2]), sleep_ms = atoi(argv[3]);
  double c = 0;
  double compute_wall = now_us(), compute_cpu = clock_us(CLOCK_THREAD_CPUTIME_ID);
  sonde_region_begin("compute");
  for (int i = 0; i < calls; ++i) cblas_dgemm(102, 111, 111, m, 7, 5, 1.0, 0, m, 0, 5, 0.0, &c, m);
  sonde_region_end("compute");
  compute_cpu = clock_us(CLOCK_THREAD_CPUTIME_ID) - compute_cpu;
  compute_wall = now_us() - compute_wall;
  double sleep_region = now_us();
  sonde_region_begin("sleep");
  struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
  double slept = now_us();
  nanosleep(&ts, NULL);
  slept = now_us() - slept;
  sonde_region_end("sleep");
  sleep_region = now_us() - sleep_region;
  printf("c %.0f\n", c);
  printf("dgemm_us %.1f\nsleep_us %.1f\n", fake_blas_elapsed_us(), slept);
  printf("compute_cpu_us %.1f\ncompute_wall_us %.1f\nsleep_region_us %.1f\n", compute_cpu,
         compute_wall, sleep_region);
  return 0;
}
