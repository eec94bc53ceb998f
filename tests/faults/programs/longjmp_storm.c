// A host under a storm of timer signals whose handler siglongjmps out of wherever the thread is
// (issue 37): for about a second a timer fires every 20 us while the thread calls a short
// cblas_ddot in a loop, so thousands of jumps land inside the wrapper, some between opening a
// frame and starting its clock, some while it closes one. Then the timer stops and 1000
// cblas_daxpy and 10 cblas_dgemm calls run, routines the storm never called: each is counted
// in the profile, whatever the jumps left.
// longjmp_storm [altstack]   the handler runs on a sigaltstack
#include <cblas.h>
#include <stdio.h>
#include <string.h>

#include "jump_storm.h"

static double x[64], y[64];
static volatile double sink;

static void ddot(void) { sink = cblas_ddot(64, x, 1, y, 1); }

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  storm_prepare(argc > 1 && strcmp(argv[1], "altstack") == 0);
  double a[16], b[16], c[16];
  for (int i = 0; i < 64; ++i) x[i] = y[i] = 1;
  for (int i = 0; i < 16; ++i) a[i] = b[i] = 1;
  // The first calls bind the symbols and set OpenBLAS and sonde up: not to be interrupted.
  ddot();
  long finished = 0;
  long jumps = storm_run(ddot, &finished);
  double sum = 0;
  for (int i = 0; i < 1000; ++i) {
    cblas_daxpy(64, 1.0, x, 1, y, 1);
    sum += y[0];
  }
  for (int i = 0; i < 10; ++i)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0, a, 4, b, 4, 0.0, c, 4);
  // What the timer's luck decides on stderr, the rest on stdout, the same under sonde.
  fprintf(stderr, "jumps %ld ddot %ld finished\n", jumps, finished);
  printf("ddot %s, then daxpy 1000 (sum %.0f), dgemm 10 (c %.0f)\n", sink == 64 ? "right" : "wrong",
         sum, c[0]);
  return 0;
}
