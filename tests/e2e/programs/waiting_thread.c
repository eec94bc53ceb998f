/* The three kinds of thread a training process has, each making one measured call (cblas_sdot)
 * at its start: "main" computes in BLAS products; "waiter" then waits on a condition variable
 * until main is done, as a process-group backend's thread waits for work, waking every 10 ms to
 * compute 3 ms of CPU where no wrapper sees it (gloo's threads sum DDP's fp16-compressed
 * gradients so: 6-12 % of their lives); "worker" then computes for 0.3 s of CPU where no
 * wrapper sees it. Prints the products' checksum. */
#define _GNU_SOURCE
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;
static int done;
static float x[4] = {1, 2, 3, 4}, y[4] = {4, 3, 2, 1};

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void spin_cpu(double seconds) {
  double start = cpu_s();
  volatile double acc = 0;
  for (long i = 1; cpu_s() - start < seconds; ++i) acc += 1.0 / (double)i;
}

static void* waiter(void* arg) {
  (void)arg;
  pthread_setname_np(pthread_self(), "waiter");
  volatile float d = cblas_sdot(4, x, 1, y, 1);
  (void)d;
  pthread_mutex_lock(&mu);
  while (!done) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 10000000;
    if (until.tv_nsec >= 1000000000) until.tv_sec += 1, until.tv_nsec -= 1000000000;
    pthread_cond_timedwait(&done_cv, &mu, &until);
    if (!done) spin_cpu(0.003);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void* worker(void* arg) {
  pthread_setname_np(pthread_self(), "worker");
  volatile double acc = cblas_sdot(4, x, 1, y, 1);
  spin_cpu(0.3);
  *(double*)arg = acc;
  return NULL;
}

int main(void) {
  enum { N = 256 };
  float* a = calloc(N * N, sizeof(float));
  float* b = calloc(N * N, sizeof(float));
  float* c = calloc(N * N, sizeof(float));
  for (int i = 0; i < N * N; ++i) a[i] = b[i] = (float)(i % 7) / 7.0f;
  pthread_t w, k;
  double worked = 0;
  pthread_create(&w, NULL, waiter, NULL);
  pthread_create(&k, NULL, worker, &worked);
  double sum = 0;
  for (int r = 0; r < 60; ++r) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
    sum += c[r];
  }
  pthread_join(k, NULL);
  pthread_mutex_lock(&mu);
  done = 1;
  pthread_cond_signal(&done_cv);
  pthread_mutex_unlock(&mu);
  pthread_join(w, NULL);
  printf("checksum %.3f %d\n", sum, worked > 0);
  free(a);
  free(b);
  free(c);
  return 0;
}
