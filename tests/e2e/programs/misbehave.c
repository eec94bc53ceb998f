/* A host that ends badly after some BLAS calls, to check what the profile keeps.
 * Usage: misbehave abort|segv|sigterm|sigint|spin|exit3|sigexit|churn N|deepbind [LIB]|fork-stress
 * N */
#include <cblas.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sonde/sonde.h"

static float dot(int times) {
  float x[2] = {1, 2}, s = 0;
  for (int i = 0; i < times; ++i) s += cblas_sdot(2, x, 1, x, 1);
  return s;
}

static volatile int stop;

static void exit_from_handler(int sig) { _exit(3); }

static void* one_call(void* arg) {
  dot(1);
  return NULL;
}

/* Keeps sonde's locks busy: new call paths (node allocation), new region names (registry). */
static void* churn(void* arg) {
  char name[32];
  for (long i = 0; !stop; ++i) {
    snprintf(name, sizeof name, "churn-%ld", i % 5000);
    sonde_region_begin(name);
    dot(1);
    sonde_region_end(name);
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* what = argv[1];
  printf("calls %.0f\n", dot(10));
  fflush(stdout);
  if (!strcmp(what, "abort")) abort();
  if (!strcmp(what, "segv")) {
    volatile int* p = NULL;
    *p = 1;
  }
  if (!strcmp(what, "sigterm")) raise(SIGTERM);
  if (!strcmp(what, "sigint")) raise(SIGINT);
  if (!strcmp(what, "spin")) { /* until killed from outside */
    for (;;) dot(1000);
  }
  if (!strcmp(what, "exit3")) return 3;
  if (!strcmp(what, "churn")) { /* many short threads, one after another */
    int n = argc > 2 ? atoi(argv[2]) : 1000;
    for (int i = 0; i < n; ++i) {
      pthread_t t;
      pthread_create(&t, NULL, one_call, NULL);
      pthread_join(t, NULL);
    }
    return 0;
  }
  if (!strcmp(what, "sigexit")) { /* _exit from a signal handler that interrupts malloc */
    signal(SIGALRM, exit_from_handler);
    struct itimerval t = {{0, 0}, {0, 20000}};
    setitimer(ITIMER_REAL, &t, NULL);
    for (;;) free(malloc(1000));
  }
  if (!strcmp(what, "deepbind")) {
    void* h = dlopen(argc > 2 ? argv[2] : "libm.so.6", RTLD_NOW | RTLD_DEEPBIND);
    printf("deepbind %s\n", h ? "loaded" : dlerror());
    return 0;
  }
  if (!strcmp(what, "fork-stress")) {
    int forks = argc > 2 ? atoi(argv[2]) : 50;
    pthread_t t;
    pthread_create(&t, NULL, churn, NULL);
    int ok = 0;
    for (int i = 0; i < forks; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        dot(1);
        _exit(0);
      }
      int status;
      waitpid(pid, &status, 0);
      ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("forks ok %d\n", ok);
    return ok == forks ? 0 : 1;
  }
  return 0;
}
