// A host under a storm of timer signals whose handler siglongjmps out of wherever the thread is
// (issue 37): for about a second a timer fires every 20 us while the thread calls a short
// cblas_ddot in a loop, so thousands of jumps land inside the wrapper, some between opening a
// frame and starting its clock, some while it closes one. Then the timer stops and 1000
// cblas_daxpy and 10 cblas_dgemm calls run, routines the storm never called: each is counted
// in the profile, whatever the jumps left.
// longjmp_storm [altstack]   the handler runs on a sigaltstack
#include <cblas.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static sigjmp_buf g_back;
static volatile sig_atomic_t g_armed;
static pthread_t g_main;

static void on_alarm(int sig) {
  // The timer is the process's: a signal that reaches another thread is passed on.
  if (!pthread_equal(pthread_self(), g_main)) {
    pthread_kill(g_main, sig);
    return;
  }
  if (!g_armed) return;
  g_armed = 0;  // until the next sigsetjmp has saved where to come back to
  siglongjmp(g_back, 1);
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  g_main = pthread_self();
  int alt = argc > 1 && strcmp(argv[1], "altstack") == 0;
  if (alt) {
    static char stack[1 << 16];
    stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = alt ? SA_ONSTACK : 0;
  sigaction(SIGALRM, &sa, NULL);
  double x[64], y[64], a[16], b[16], c[16];
  for (int i = 0; i < 64; ++i) x[i] = y[i] = 1;
  for (int i = 0; i < 16; ++i) a[i] = b[i] = 1;
  // The first calls bind the symbols and set OpenBLAS and sonde up: not to be interrupted.
  volatile double sink = cblas_ddot(64, x, 1, y, 1);
  volatile long jumps = 0, finished = 0;
  struct itimerval storm = {{0, 20}, {0, 20}};
  setitimer(ITIMER_REAL, &storm, NULL);
  double end = seconds() + 1.0;
  while (seconds() < end) {
    if (sigsetjmp(g_back, 1) != 0) {
      ++jumps;
      continue;
    }
    g_armed = 1;
    for (int i = 0; i < 100; ++i) {
      sink = cblas_ddot(64, x, 1, y, 1);
      ++finished;
    }
    g_armed = 0;
  }
  g_armed = 0;
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  double sum = 0;
  for (int i = 0; i < 1000; ++i) {
    cblas_daxpy(64, 1.0, x, 1, y, 1);
    sum += y[0];
  }
  for (int i = 0; i < 10; ++i)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0, a, 4, b, 4, 0.0, c, 4);
  // What the timer's luck decides on stderr, the rest on stdout, the same under sonde.
  fprintf(stderr, "jumps %ld ddot %ld finished\n", jumps, finished);
  printf("ddot %s, then daxpy 1000 (sum %.0f), dgemm 10 (c %.0f)\n", sink == 64 ? "right" : "wrong",
         sum, c[0]);
  return 0;
}
