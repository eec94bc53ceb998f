/* Every way a run makes processes and threads, each doing a known number of BLAS calls:
 *   parent: 1 call, 2 threads x 7 calls
 *   fork child A: 3 calls, exit(0)        fork child B: 2 calls, _exit(0)
 *   fork child C: execs this program as "exec-child": 5 calls
 * Usage: process_tree [exec-child] */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static float dot(int times) {
  float x[2] = {1, 2}, s = 0;
  for (int i = 0; i < times; ++i) s += cblas_sdot(2, x, 1, x, 1);
  return s;
}

static void* thread_main(void* arg) {
  dot(7);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
    dot(5);
    return 0;
  }
  dot(1);
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, thread_main, NULL);
  for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
  fflush(stdout);
  pid_t a = fork();
  if (a == 0) {
    dot(3);
    exit(0);
  }
  pid_t b = fork();
  if (b == 0) {
    dot(2);
    _exit(0);
  }
  pid_t c = fork();
  if (c == 0) {
    char* args[] = {argv[0], "exec-child", NULL};
    execv(argv[0], args);
    _exit(127);
  }
  int status, failures = 0;
  while (wait(&status) > 0) failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  printf("children failed: %d\n", failures);
  return failures;
}
