// A detached thread still inside the BLAS when main returns: the process ends under it, as
// plenty of real programs do. detached_blas [N] [MS] [SHAPES]: the thread makes GEMMs of NxN;
// main makes GEMMs of SHAPES distinct shapes (a profile that takes a while to write) and returns
// MS ms after starting the thread.
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int g_n = 128;

static void* worker(void* arg) {
  (void)arg;
  double* a = calloc((size_t)g_n * g_n, sizeof(double));
  double* c = calloc((size_t)g_n * g_n, sizeof(double));
  for (;;) {
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, g_n, g_n, g_n, 1.0, a, g_n, a, g_n, 0.0,
                c, g_n);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) g_n = atoi(argv[1]);
  int ms = argc > 2 ? atoi(argv[2]) : 50;
  int shapes = argc > 3 ? atoi(argv[3]) : 0;
  double a[8 * 8] = {0}, c[8 * 8];
  for (int i = 0; i < shapes; ++i)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1 + i % 8, 1 + (i / 8) % 8,
                1 + (i / 64) % 8, 1.0, a, 8, a, 8, 0.0, c, 8);
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  pthread_detach(t);
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  printf("main returns\n");
  fflush(stdout);
  return 0;
}
