// Threads that call the BLAS and end in different ways, then main idles and returns.
// thread_ends THREADS CALLS IDLE_MS [cancel]: each thread makes CALLS GEMMs and returns; with
// `cancel`, one more thread is cancelled while it loops over GEMMs (cancellation points between
// calls). Prints how many threads ended.
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_calls = 10;

static void gemm(void) {
  float a[16 * 16] = {0}, c[16 * 16];
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, a, 16, 0.0f, c,
              16);
}

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; i < g_calls; ++i) gemm();
  return NULL;
}

static void* endless(void* arg) {
  (void)arg;
  for (;;) {
    gemm();
    pthread_testcancel();
  }
  return NULL;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 4;
  g_calls = argc > 2 ? atoi(argv[2]) : 10;
  int idle_ms = argc > 3 ? atoi(argv[3]) : 0;
  int cancel = argc > 4 && strcmp(argv[4], "cancel") == 0;
  pthread_t* t = calloc((size_t)threads + 1, sizeof(pthread_t));
  for (int i = 0; i < threads; ++i) pthread_create(&t[i], NULL, worker, NULL);
  if (cancel) pthread_create(&t[threads], NULL, endless, NULL);
  for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
  if (cancel) {
    sleep_ms(20);
    pthread_cancel(t[threads]);
    void* result;
    pthread_join(t[threads], &result);
    if (result != PTHREAD_CANCELED) return 2;
  }
  sleep_ms(idle_ms);
  printf("%d threads ended\n", threads + cancel);
  free(t);
  return 0;
}
