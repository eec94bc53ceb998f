// GEMMs for about the milliseconds named on the command line (default 500), each millisecond in
// a region of a new name, so that the profile grows with every periodic flush.
#include <cblas.h>
#include <sonde/sonde.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kNames = 4000 };
static char names[kNames][16];  // region names must outlive their use

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char** argv) {
  double ms = argc > 1 ? atof(argv[1]) : 500;
  float a[32 * 32], b[32 * 32], c[32 * 32];
  for (int i = 0; i < 32 * 32; ++i) a[i] = b[i] = 1.0f;
  double start = now_ms();
  for (int r = 0; r < kNames && now_ms() < start + ms; ++r) {
    snprintf(names[r], sizeof names[r], "phase-%04d", r);
    sonde_region_begin(names[r]);
    for (double end = now_ms() + 1; now_ms() < end;)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 32, 32, 32, 1.0f, a, 32, b, 32, 0.0f,
                  c, 32);
    sonde_region_end(names[r]);
  }
  printf("c[0] = %g\n", c[0]);
  return 0;
}
