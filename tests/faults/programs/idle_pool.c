// A busy main thread beside an idle worker pool, as OpenBLAS keeps one: idle_pool WORKERS.
// The workers wait on a condition until main has done its GEMMs, then exit without a call.
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int done = 0;

static void* idle(void* arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  while (!done) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  return NULL;
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2;
  if (n < 0 || n > 16) n = 2;
  pthread_t workers[16];
  for (int i = 0; i < n; ++i) pthread_create(&workers[i], NULL, idle, NULL);
  static float a[128 * 128], b[128 * 128], c[128 * 128];
  for (int i = 0; i < 128 * 128; ++i) a[i] = b[i] = 1.0f;
  for (int i = 0; i < 1000; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 128, 128, 128, 1.0f, a, 128, b, 128,
                0.0f, c, 128);
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (int i = 0; i < n; ++i) pthread_join(workers[i], NULL);
  printf("c[0] = %g\n", c[0]);
  return 0;
}
