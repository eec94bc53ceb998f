/* posix_spawn and posix_spawnp, which exec the child inside glibc (past the exec wrappers),
 * given an environment of their own without sonde's variables, and posix_spawnp given the
 * parent's. Each child makes 4 BLAS calls; the parent 1.
 * Usage: spawn_env [spawn-child] */
#include <cblas.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

extern char** environ;

static void dot(int times) {
  float x[2] = {1, 2};
  for (int i = 0; i < times; ++i) cblas_sdot(2, x, 1, x, 1);
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "spawn-child") == 0) {
    dot(4);
    return 0;
  }
  dot(1);
  char* child[] = {argv[0], "spawn-child", NULL};
  char* own_env[] = {"PATH=/usr/bin:/bin", "OPENBLAS_NUM_THREADS=1", NULL};
  pid_t pids[3];
  int failures = 0;
  failures += posix_spawn(&pids[0], argv[0], NULL, NULL, child, own_env) != 0;
  failures += posix_spawnp(&pids[1], argv[0], NULL, NULL, child, own_env) != 0;
  failures += posix_spawnp(&pids[2], argv[0], NULL, NULL, child, environ) != 0;
  int status;
  for (int i = 0; i < 3; ++i) {
    failures +=
        waitpid(pids[i], &status, 0) != pids[i] || !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  printf("children failed: %d\n", failures);
  return failures;
}
