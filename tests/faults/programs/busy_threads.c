/* N threads (argv[1], default 2) each run the region "work" around the same GEMMs for as long
 * as the process lives: every routine's time is summed over threads that ran side by side, so
 * any share taken of the wall time instead of the busy threads' time passes 100 %. */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "sonde/sonde.h"

enum { kSide = 64, kCalls = 1500 };

static void* work(void* arg) {
  float* c = arg;
  static float a[kSide * kSide], b[kSide * kSide];
  sonde_region_begin("work");
  for (int r = 0; r < kCalls; ++r)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kSide, kSide, kSide, 1.0f, a, kSide, b,
                kSide, 0.0f, c, kSide);
  sonde_region_end("work");
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 1 || n > 16) return 2;
  pthread_t t[16];
  static float c[16][kSide * kSide];
  for (int i = 0; i < n; ++i) pthread_create(&t[i], NULL, work, c[i]);
  for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
  printf("%d threads done\n", n);
  return 0;
}
