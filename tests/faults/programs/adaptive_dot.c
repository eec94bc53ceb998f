/* Adaptive timing's host: each of T threads calls cblas_sdot on n floats `calls` times (a routine
 * of steady, known cost) and, with "gemm", a 4x4 cblas_sgemm as often (a tiny call with a shape),
 * then prints its results, so a run under sonde can be compared with one without.
 *
 *   adaptive_dot CALLS N THREADS [gemm] */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long g_calls;
static int g_n;
static int g_gemm;

struct result {
  double dot_sum;
  float c[16];
};

static void* work(void* arg) {
  struct result* r = arg;
  float* x = malloc(sizeof(float) * (size_t)g_n);
  float* y = malloc(sizeof(float) * (size_t)g_n);
  float a[16], b[16];
  for (int i = 0; i < g_n; ++i) {
    x[i] = (float)(i % 7) * 0.25f;
    y[i] = (float)(i % 5) * 0.5f;
  }
  for (int i = 0; i < 16; ++i) {
    a[i] = (float)i / 16.0f;
    b[i] = (float)(16 - i) / 16.0f;
    r->c[i] = 0.0f;
  }
  double acc = 0.0;
  for (long i = 0; i < g_calls; ++i) {
    acc += cblas_sdot(g_n, x, 1, y, 1);
    if (g_gemm)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1e-6f, a, 4, b, 4, 1.0f, r->c,
                  4);
  }
  r->dot_sum = acc;
  free(x);
  free(y);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: adaptive_dot CALLS N THREADS [gemm]\n");
    return 2;
  }
  g_calls = atol(argv[1]);
  g_n = atoi(argv[2]);
  int threads = atoi(argv[3]);
  g_gemm = argc > 4 && strcmp(argv[4], "gemm") == 0;
  if (threads < 1 || threads > 64 || g_n < 1 || g_calls < 0) return 2;
  pthread_t tid[64];
  struct result res[64];
  for (int t = 0; t < threads; ++t) pthread_create(&tid[t], NULL, work, &res[t]);
  for (int t = 0; t < threads; ++t) pthread_join(tid[t], NULL);
  for (int t = 0; t < threads; ++t) {
    printf("thread %d dot_sum %.9g c", t, res[t].dot_sum);
    for (int i = 0; i < 16; ++i) printf(" %.7g", res[t].c[i]);
    printf("\n");
  }
  printf("calls_total %ld\n", g_calls * threads);
  return 0;
}
