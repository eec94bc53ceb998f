/* A library whose constructor calls BLAS and starts a thread that calls BLAS while the process
 * (and maybe sonde) is still initialising: interposed calls must work before sonde is ready. */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>

static pthread_t early;
static float ctor_result, thread_result;

static void* early_thread(void* arg) {
  float x[3] = {1, 2, 3};
  for (int i = 0; i < 1000; ++i) thread_result = cblas_sdot(3, x, 1, x, 1);
  return NULL;
}

__attribute__((constructor)) static void ctor(void) {
  float x[2] = {3, 4};
  ctor_result = cblas_sdot(2, x, 1, x, 1);
  pthread_create(&early, NULL, early_thread, NULL);
}

void ctor_blas_report(void) {
  pthread_join(early, NULL);
  printf("ctor %.0f thread %.0f\n", ctor_result, thread_result);
}
