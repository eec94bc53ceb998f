/* N threads x M tiny BLAS calls; prints the checksum so results can be compared with and
 * without sonde. Usage: blas_threads THREADS CALLS_PER_THREAD */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long calls;

static void* work(void* arg) {
  float x[4] = {1, 2, 3, 4}, y[4] = {4, 3, 2, 1};
  double* sum = arg;
  for (long i = 0; i < calls; ++i) *sum += cblas_sdot(4, x, 1, y, 1);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  int threads = atoi(argv[1]);
  calls = atol(argv[2]);
  pthread_t tid[64];
  double sums[64] = {0};
  for (int t = 0; t < threads; ++t) pthread_create(&tid[t], NULL, work, &sums[t]);
  double total = 0;
  for (int t = 0; t < threads; ++t) {
    pthread_join(tid[t], NULL);
    total += sums[t];
  }
  printf("checksum %.1f\n", total);
  return 0;
}
