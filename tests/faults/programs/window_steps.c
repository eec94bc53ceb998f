/* A host with work before its loop and a loop of marked steps, for the collection window
 * (SONDE_DELAY, SONDE_STEPS): `delay` makes 5 dgemm calls, sleeps 1.5 s, then 7 sgemm calls;
 * `steps` makes 4 dgemm calls of set-up, then 10 steps, each a region "step" holding 2 sgemm
 * calls inside a region "forward", with a region "train" around the whole loop. */
#include <cblas.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sonde/sonde.h"

static float fa[64], fb[64], fc[64];
static double da[64], db[64], dc[64];

static void dgemm(void) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 8, 8, 8, 1.0, da, 8, db, 8, 0.0, dc, 8);
}

static void sgemm(void) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 8, 8, 8, 1.0f, fa, 8, fb, 8, 0.0f, fc, 8);
}

int main(int argc, char** argv) {
  for (int i = 0; i < 64; ++i) fa[i] = fb[i] = (float)(da[i] = db[i] = i % 7 * 0.25);
  if (argc > 1 && strcmp(argv[1], "delay") == 0) {
    for (int i = 0; i < 5; ++i) dgemm();
    struct timespec pause = {1, 500000000};
    nanosleep(&pause, NULL);
    for (int i = 0; i < 7; ++i) sgemm();
  } else {
    for (int i = 0; i < 4; ++i) dgemm();
    sonde_region_begin("train");
    for (int step = 0; step < 10; ++step) {
      sonde_region_begin("step");
      sonde_region_begin("forward");
      sgemm();
      sgemm();
      sonde_region_end("forward");
      sonde_region_end("step");
    }
    sonde_region_end("train");
  }
  printf("%.3f %.3f\n", fc[9], dc[9]);
  return 0;
}
