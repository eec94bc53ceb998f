// A host that recovers from a bad argument (issue 37): a SIGSEGV handler siglongjmps out of
// ddot_ 20 times, its length `n` behind a page the process may not read, then 100 good ddot_
// calls and 10 cblas_dgemm calls run. Under sonde the cost model reads *n before the real
// ddot_ does, so each jump leaves the wrapper at one chosen moment: after its frame was opened
// (the suppress flag raised) and before the frame's clock started. Alone, OpenBLAS's ddot_
// faults reading *n, before it has done anything else.
#include <cblas.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

double ddot_(const int* n, const double* x, const int* incx, const double* y, const int* incy);

static sigjmp_buf g_back;

static void on_segv(int sig) {
  (void)sig;
  siglongjmp(g_back, 1);
}

int main(void) {
  openblas_set_num_threads(1);
  int* unreadable = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (unreadable == MAP_FAILED) return 2;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_segv;
  sa.sa_flags = SA_NODEFER;
  sigaction(SIGSEGV, &sa, NULL);
  double x[4] = {1, 2, 3, 4}, a[16], b[16], c[16];
  for (int i = 0; i < 16; ++i) a[i] = b[i] = 1;
  const int one = 1, four = 4;
  volatile int faulted = 0, returned = 0;
  for (int i = 0; i < 20; ++i) {
    if (sigsetjmp(g_back, 1) == 0) {
      (void)ddot_(unreadable, x, &one, x, &one);
      ++returned;
    } else {
      ++faulted;
    }
  }
  double sum = 0;
  for (int i = 0; i < 100; ++i) sum += ddot_(&four, x, &one, x, &one);
  for (int i = 0; i < 10; ++i)
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 4, 4, 4, 1.0, a, 4, b, 4, 0.0, c, 4);
  printf("ddot_ %d faulted %d returned, then ddot_ 100 (sum %.0f), dgemm 10 (c %.0f)\n", faulted,
         returned, sum, c[0]);
  return 0;
}
