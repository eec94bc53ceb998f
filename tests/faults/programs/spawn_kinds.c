// A process that makes 5 GEMMs and starts another program in one of the ways processes start:
//   spawn_kinds fork|vfork|posix_spawn|exec PROGRAM [ARGS...]
// fork: the child makes 5 more GEMMs and returns from main; vfork and posix_spawn: the child
// runs PROGRAM; exec: this process becomes PROGRAM. Prints the child's exit status.
#include <cblas.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

static void gemms(int n) {
  float a[16 * 16] = {0}, c[16 * 16];
  for (int i = 0; i < n; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, a, 16, 0.0f, c,
                16);
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const char* how = argv[1];
  char** child_argv = argv + 2;
  gemms(5);
  fflush(stdout);
  pid_t pid = -1;
  if (strcmp(how, "exec") == 0) {
    execv(child_argv[0], child_argv);
    return 127;
  } else if (strcmp(how, "fork") == 0) {
    pid = fork();
    if (pid == 0) {
      gemms(5);
      return 0;
    }
  } else if (strcmp(how, "vfork") == 0) {
    pid = vfork();
    if (pid == 0) {
      execv(child_argv[0], child_argv);
      _exit(127);
    }
  } else if (strcmp(how, "posix_spawn") == 0) {
    if (posix_spawn(&pid, child_argv[0], NULL, NULL, child_argv, environ) != 0) return 3;
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 4;
  printf("%s child status %d\n", how, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}
