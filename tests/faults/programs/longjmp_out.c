// A host whose SIGALRM handler siglongjmps out of a measured call (issue 37): 20 times a long
// cblas_ddot is interrupted and abandoned, then 10 small cblas_dgemm calls run. Its own count of
// each is printed, for the profile to match. ddot is the one left: a level-1 routine holds no
// buffer or lock of OpenBLAS's, whereas a jump out of dgemm broke OpenBLAS itself now and then
// (1 run in ~200 aborted without sonde).
// longjmp_out [altstack|returns|returns-altstack]
//   altstack  the handler runs on a sigaltstack
//   returns   the handler calls cblas_dnrm2 and returns: nothing is abandoned (the ddot it
//             interrupted goes on; BLAS inside BLAS is not measured)
#include <cblas.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static sigjmp_buf g_back;
static int g_returns;
static volatile int g_handled;

static pthread_t g_main;

static void on_alarm(int sig) {
  // The alarm is the process's: it may come to one of OpenBLAS's threads, which passes it on.
  if (!pthread_equal(pthread_self(), g_main)) {
    pthread_kill(g_main, sig);
    return;
  }
  if (!g_returns) siglongjmp(g_back, 1);
  double x[4] = {1, 1, 1, 1};
  g_handled += cblas_dnrm2(4, x, 1) == 2.0;
}

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  g_main = pthread_self();
  const char* mode = argc > 1 ? argv[1] : "";
  int alt = strstr(mode, "altstack") != NULL;
  g_returns = strncmp(mode, "returns", 7) == 0;
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
  enum { N = 1 << 22 };  // 2 x 32 MiB of zero pages: a few ms a ddot
  double* x = calloc(N, sizeof(double));
  double* y = calloc(N, sizeof(double));
  double a[16], b[16], c[16];
  for (int i = 0; i < 16; ++i) a[i] = b[i] = 1;
  // OpenBLAS sets itself up in its first calls: not to be interrupted.
  (void)cblas_ddot(16, a, 1, b, 1);
  int abandoned = 0, finished = 0;
  for (int i = 0; i < 20; ++i) {
    if (sigsetjmp(g_back, 1) == 0) {
      struct itimerval t = {{0, 0}, {0, 500}};  // 0.5 ms into it
      setitimer(ITIMER_REAL, &t, NULL);
      volatile double d = cblas_ddot(N, x, 1, y, 1);
      (void)d;
      struct itimerval off = {{0, 0}, {0, 0}};
      setitimer(ITIMER_REAL, &off, NULL);
      ++finished;
    } else {
      ++abandoned;
    }
  }
  for (int i = 0; i < 10; ++i)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0, a, 4, b, 4, 0.0, c, 4);
  // Whether the handler ran inside a ddot, not how often: that is the timer's luck (the
  // first ddot, touching its pages, always outlasts it).
  printf("ddot %d abandoned %d finished, dgemm 10, c %.0f, handler ran: %s\n", abandoned, finished,
         c[0], g_handled > 0 ? "yes" : "no");
  return 0;
}
