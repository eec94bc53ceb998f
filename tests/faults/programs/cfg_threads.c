// THREADS CALLS [SLEEP_MS]: THREADS threads each make CALLS small GEMMs, then the main thread
// sleeps SLEEP_MS (so a busy flusher would show in the CPU time) and prints a checksum.
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int calls;

static void* work(void* arg) {
  float a[16 * 16], b[16 * 16], c[16 * 16];
  for (int i = 0; i < 16 * 16; ++i) a[i] = b[i] = 1.0f;
  for (int i = 0; i < calls; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, b, 16, 0.0f, c,
                16);
  *(float*)arg = c[0];
  return NULL;
}

int main(int argc, char** argv) {
  int threads = argc > 1 ? atoi(argv[1]) : 1;
  calls = argc > 2 ? atoi(argv[2]) : 10;
  int sleep_ms = argc > 3 ? atoi(argv[3]) : 0;
  pthread_t tid[256];
  float out[256];
  if (threads > 256) threads = 256;
  for (int i = 0; i < threads; ++i) pthread_create(&tid[i], NULL, work, &out[i]);
  float sum = 0;
  for (int i = 0; i < threads; ++i) {
    pthread_join(tid[i], NULL);
    sum += out[i];
  }
  struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
  printf("threads %d calls %d sum %g\n", threads, calls, sum);
  return 0;
}
