// Exit while sonde's flusher works: a thread keeps reaching GEMMs through call sites never seen
// before (each a new call site the flusher must name), while main returns and exit handlers
// allocate and free; the last handler stops the thread between two calls, so that nothing calls
// the BLAS once its own destructors run (the host is correct without sonde).
// exit_race [SITES] [HANDLER_MS]: prints a checksum of the main thread's work.
#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static float a[16 * 16], b[16 * 16], c[16 * 16];
static int g_sites = 512;
static int g_handler_ms = 30;
static atomic_int g_stop, g_stopped;

// One call instruction per case: each case is a call site of its own, with a shape of its own.
#define GEMM(n)                                                                               \
  case n:                                                                                     \
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 1 + (n) % 16, 1 + ((n) / 16) % 16, \
                1 + ((n) / 256) % 16, 1.0f, a, 16, b, 16, 0.0f, c, 16);                       \
    break;
#define GEMM4(n) GEMM(n) GEMM(n + 1) GEMM(n + 2) GEMM(n + 3)
#define GEMM16(n) GEMM4(n) GEMM4(n + 4) GEMM4(n + 8) GEMM4(n + 12)
#define GEMM64(n) GEMM16(n) GEMM16(n + 16) GEMM16(n + 32) GEMM16(n + 48)
#define GEMM256(n) GEMM64(n) GEMM64(n + 64) GEMM64(n + 128) GEMM64(n + 192)

static void __attribute__((noinline)) call_site(int i) {
  switch (i % 1024) { GEMM256(0) GEMM256(256) GEMM256(512) GEMM256(768) }
}

static void pause_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static void* worker(void* arg) {
  (void)arg;
  for (int i = 0; !atomic_load(&g_stop); ++i) {
    call_site(i);
    if (i % 8 == 0) pause_us(50);
  }
  atomic_store(&g_stopped, 1);
  for (;;) pause_us(1000000);
  return NULL;
}

// An exit handler that does what C++ static destructors do: frees and allocates, for a while.
static void churn(void) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  void* keep[64] = {0};
  for (unsigned i = 0;; ++i) {
    unsigned slot = (i * 2654435761u) % 64;
    free(keep[slot]);
    keep[slot] = malloc(16 + (i * 40503u) % 2048);
    memset(keep[slot], 1, 16);
    if (i % 256 == 0) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
      if (ms >= g_handler_ms) break;
    }
  }
  for (int i = 0; i < 64; ++i) free(keep[i]);
}

static void stop_worker(void) {
  atomic_store(&g_stop, 1);
  while (!atomic_load(&g_stopped)) pause_us(100);
}

int main(int argc, char** argv) {
  if (argc > 1) g_sites = atoi(argv[1]);
  if (argc > 2) g_handler_ms = atoi(argv[2]);
  for (int i = 0; i < 16 * 16; ++i) a[i] = b[i] = 1.0f;
  atexit(stop_worker);
  for (int i = 0; i < 4; ++i) atexit(churn);
  double sum = 0;
  // The main thread's own calls, named by earlier flushes.
  for (int i = 0; i < g_sites; ++i) {
    call_site(i);
    sum += c[0];
    if (i % 16 == 0) pause_us(200);
  }
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  pthread_detach(t);
  pause_us(2000);
  printf("sum %g\n", sum);
  fflush(stdout);
  return 0;
}
