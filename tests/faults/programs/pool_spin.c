/* Threads that never make an intercepted call, as a library's worker pool: a worker of the
 * program's own that only spins (0.3 s of CPU in spin_only_loop), and OpenBLAS's own pool,
 * started by its constructor before sonde's, running the kernels of main's large GEMMs.
 * Under the sampler both must be sampled, under their threads' roots. */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile double sink;

static double thread_cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) double spin_only_loop(long n) {
  double acc = 0.0;
  for (long i = 1; i <= n; ++i) acc += 1.0 / ((double)i * (double)i);
  return acc;
}

static void* spinner(void* arg) {
  (void)arg;
  double start = thread_cpu_seconds(), acc = 0.0;
  while (thread_cpu_seconds() - start < 0.3) acc += spin_only_loop(1000000);
  sink = acc;
  return NULL;
}

int main(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, spinner, NULL) != 0) return 2;
  enum { N = 384 };
  float* a = malloc(sizeof(float) * N * N);
  float* b = malloc(sizeof(float) * N * N);
  float* c = malloc(sizeof(float) * N * N);
  for (int i = 0; i < N * N; ++i) a[i] = b[i] = 0.25f;
  for (int i = 0; i < 100; ++i) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
  }
  pthread_join(t, NULL);
  printf("c[0] = %.2f spin %s\n", c[0], sink > 0 ? "done" : "none"); /* its sum varies */
  free(a);
  free(b);
  free(c);
  return 0;
}
