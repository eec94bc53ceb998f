// A host whose only thread ends with a raw SYS_exit: the end of a SECCOMP_MODE_STRICT sandbox,
// where read, write, exit and sigreturn are the only system calls left (no exit_group, so no
// exit() or _exit()). Nothing of glibc's exit path runs: no atexit handler, no stdio flush.
//   raw_exit strict CODE   3 GEMMs, strict mode, 2 more GEMMs, write "done", SYS_exit(CODE)
//   raw_exit plain CODE    the same without seccomp
//   raw_exit wait CODE     as strict, but says "ready" and reads a line of stdin before "done"
// Output left in stdio's buffer is lost alone too: "lost" must never appear.
#include <cblas.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void gemms(int n) {
  static float a[16 * 16], c[16 * 16];
  for (int i = 0; i < n; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, a, 16, 0.0f, c,
                16);
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "strict";
  int code = argc > 2 ? atoi(argv[2]) : 0;
  gemms(3);
  printf("lost\n");  // to a pipe: fully buffered, and no exit flushes it
  if (strcmp(mode, "plain") != 0 && prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) != 0) {
    perror("prctl");
    return 99;
  }
  gemms(2);
  if (strcmp(mode, "wait") == 0) {
    static const char ready[] = "ready\n";
    char line[16];
    syscall(SYS_write, 1, ready, sizeof ready - 1);
    syscall(SYS_read, 0, line, sizeof line);
  }
  static const char done[] = "done\n";
  syscall(SYS_write, 1, done, sizeof done - 1);
  syscall(SYS_exit, code);
  return 98;
}
