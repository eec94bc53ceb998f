// Many fork children end with _exit at the same moment (a pipe closed by the parent releases
// them all). exit_together [CHILDREN] [CALLS]: the parent makes one GEMM, each child CALLS;
// prints how many children ended with status 0.
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int children = argc > 1 ? atoi(argv[1]) : 100;
  int calls = argc > 2 ? atoi(argv[2]) : 10;
  float a[16 * 16] = {0}, c[16 * 16];
  int gate[2];
  if (pipe(gate) != 0) return 2;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, a, 16, 0.0f, c,
              16);
  for (int i = 0; i < children; ++i) {
    pid_t pid = fork();
    if (pid < 0) return 2;
    if (pid == 0) {
      close(gate[1]);
      for (int k = 0; k < calls; ++k)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, a, 16, 0.0f,
                    c, 16);
      char byte;
      while (read(gate[0], &byte, 1) > 0) {
      }
      _exit(0);
    }
  }
  close(gate[0]);
  close(gate[1]);  // every child's read returns 0 now: they all end together
  int ok = 0, status;
  while (wait(&status) > 0) ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
  printf("%d children ended well\n", ok);
  return ok == children ? 0 : 1;
}
