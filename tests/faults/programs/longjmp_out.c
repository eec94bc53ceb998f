// A host whose SIGALRM handler siglongjmps out of cblas_dgemm (issue 37): 20 times a large
// dgemm is interrupted and abandoned, then 10 cblas_ddot calls run. Its own count of each is
// printed, for the profile to match.
// longjmp_out [altstack|returns|returns-altstack]
//   altstack  the handler runs on a sigaltstack
//   returns   the handler calls cblas_ddot and returns: nothing is abandoned (the dgemm it
//             interrupted goes on; BLAS inside BLAS is not measured)
#include <cblas.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

static sigjmp_buf g_back;

static int g_returns;
static volatile int g_handled;

static void on_alarm(int sig) {
  (void)sig;
  if (!g_returns) siglongjmp(g_back, 1);
  double x[4] = {1, 1, 1, 1};
  g_handled += (int)cblas_ddot(4, x, 1, x, 1) == 4;
}

int main(int argc, char** argv) {
  // One thread: a jump out of a multithreaded dgemm leaves OpenBLAS's workers waiting for it.
  openblas_set_num_threads(1);
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
  enum { N = 1200 };
  double* a = calloc((size_t)N * N, sizeof(double));
  double* b = calloc((size_t)N * N, sizeof(double));
  double* c = calloc((size_t)N * N, sizeof(double));
  int abandoned = 0, finished = 0;
  for (int i = 0; i < 20; ++i) {
    if (sigsetjmp(g_back, 1) == 0) {
      struct itimerval t = {{0, 0}, {0, 2000}};  // 2 ms into a ~100 ms dgemm
      setitimer(ITIMER_REAL, &t, NULL);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, N, N, 1.0, a, N, b, N, 0.0, c, N);
      struct itimerval off = {{0, 0}, {0, 0}};
      setitimer(ITIMER_REAL, &off, NULL);
      ++finished;
    } else {
      ++abandoned;
    }
  }
  double x[16] = {1, 2, 3}, y[16] = {4, 5, 6}, s = 0;
  for (int i = 0; i < 10; ++i) s += cblas_ddot(16, x, 1, y, 1);
  printf("dgemm %d abandoned %d finished, ddot 10, sum %.0f, handled %d\n", abandoned, finished,
         s, g_handled);
  return 0;
}
