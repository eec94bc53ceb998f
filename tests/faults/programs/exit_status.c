// The simplest host: a few GEMMs, then the exit status and signal named on the command line.
// exit_status CODE [SIGNAL]: exits with CODE, or raises SIGNAL (by number) after the calls.
// exit_status CODE quick: ends with quick_exit(CODE), whose handler makes one more GEMM.
#include <cblas.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float a[64 * 64], b[64 * 64], c[64 * 64];

static void one_more(void) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, a, 64, b, 64, 0.0f, c,
              64);
}

int main(int argc, char** argv) {
  for (int i = 0; i < 64 * 64; ++i) a[i] = b[i] = 1.0f;
  for (int i = 0; i < 10; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, a, 64, b, 64, 0.0f, c,
                64);
  printf("c[0] = %g\n", c[0]);
  fflush(stdout);
  if (argc > 2 && strcmp(argv[2], "quick") == 0) {
    at_quick_exit(one_more);
    quick_exit(atoi(argv[1]));
  }
  if (argc > 2) raise(atoi(argv[2]));
  return argc > 1 ? atoi(argv[1]) : 0;
}
