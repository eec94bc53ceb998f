// Processes whose last thread ends with pthread_exit, which glibc turns into exit(0):
//   last_thread main        main() calls pthread_exit while a thread still makes GEMMs
//   last_thread fork        a thread forks; in the child that thread is the only one, and returns
//   last_thread fork-main   as fork, and the child's thread starts one more before it returns
// The parent of a fork prints the child's exit status.
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void gemms(int n) {
  float a[16 * 16] = {0}, c[16 * 16];
  for (int i = 0; i < n; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 16, 16, 16, 1.0f, a, 16, a, 16, 0.0f, c,
                16);
}

static void* worker(void* arg) {
  (void)arg;
  gemms(5);
  return NULL;
}

static void* forker(void* arg) {
  const char* mode = arg;
  gemms(5);
  pid_t pid = fork();
  if (pid == 0) {
    gemms(7);
    if (strcmp(mode, "fork-main") == 0) {
      pthread_t t;
      pthread_create(&t, NULL, worker, NULL);
      pthread_detach(t);
    }
    printf("child done\n");
    fflush(stdout);
    return NULL;  // the child's last (or next-to-last) thread ends: the child must end
  }
  int status = 0;
  waitpid(pid, &status, 0);
  printf("child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
  fflush(stdout);
  return NULL;
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "main";
  pthread_t t;
  if (strcmp(mode, "main") == 0) {
    gemms(3);
    pthread_create(&t, NULL, worker, NULL);
    pthread_detach(t);
    printf("main ends\n");
    fflush(stdout);
    pthread_exit(NULL);
  }
  pthread_create(&t, NULL, forker, (void*)mode);
  pthread_join(t, NULL);
  return 0;
}
