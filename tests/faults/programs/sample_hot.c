/* The sampler's host: BLAS calls in a region "setup", then a native hot loop of its own in a
 * region "update" (no intercepted call inside), so only the sampler sees where "update" spends
 * its time. With "hostile": the host also runs its own SIGPROF profiler (setitimer) with a
 * handler without SA_RESTART, and makes blocking system calls that would fail with EINTR if a
 * signal came during them; it prints what it saw, to be compared with the run without sonde. */
#include <cblas.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sonde/sonde.h"

static volatile double sink;
static volatile sig_atomic_t prof_ticks;

__attribute__((noinline)) double hot_update_loop(long n) {
  double acc = 0.0;
  for (long i = 1; i <= n; ++i) acc += 1.0 / ((double)i * (double)i);
  return acc;
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_prof(int sig) {
  (void)sig;
  prof_ticks++;
}

static void* writer(void* arg) {
  int fd = *(int*)arg;
  for (int i = 0; i < 20; ++i) {
    struct timespec d = {0, 2000000};
    nanosleep(&d, NULL);
    if (write(fd, "x", 1) != 1) break;
  }
  return NULL;
}

/* A fork child's own hot loop, in a region of its own. */
static int fork_child_work(void) {
  pid_t pid = fork();
  if (pid == 0) {
    sonde_region_begin("child_work");
    double start = cpu_seconds(), acc = 0.0;
    while (cpu_seconds() - start < 0.2) acc += hot_update_loop(1000000);
    sink = acc;
    sonde_region_end("child_work");
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}

int main(int argc, char** argv) {
  int hostile = argc > 1 && strcmp(argv[1], "hostile") == 0;
  if (argc > 1 && strcmp(argv[1], "fork") == 0) {
    printf("child %d\n", fork_child_work());
  }
  float a[64 * 64], b[64 * 64], c[64 * 64];
  for (int i = 0; i < 64 * 64; ++i) a[i] = b[i] = 0.5f;
  if (hostile) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_prof; /* no SA_RESTART: a host that sees every EINTR */
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &it, NULL);
  }
  sonde_region_begin("setup");
  for (int i = 0; i < 3; ++i) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, a, 64, b, 64, 0.0f, c,
                64);
  }
  sonde_region_end("setup");
  sonde_region_begin("update");
  double start = cpu_seconds();
  double acc = 0.0;
  while (cpu_seconds() - start < 0.4) acc += hot_update_loop(2000000);
  sink = acc;
  sonde_region_end("update");
  if (hostile) {
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    /* The host's own timer is off now: from here on an EINTR can only come from someone else. */
    int fds[2];
    if (pipe(fds) != 0) return 2;
    pthread_t t;
    pthread_create(&t, NULL, writer, &fds[1]);
    int eintr = 0, got = 0;
    while (got < 20) {
      char ch;
      ssize_t r = read(fds[0], &ch, 1);
      if (r == 1) {
        got++;
        sink = hot_update_loop(200000); /* CPU time between the blocking calls */
      } else if (r < 0 && errno == EINTR) {
        eintr++;
      } else {
        break;
      }
      struct timespec d = {0, 500000};
      if (nanosleep(&d, NULL) != 0 && errno == EINTR) eintr++;
    }
    pthread_join(t, NULL);
    struct sigaction now;
    sigaction(SIGPROF, NULL, &now);
    printf("hostile: sigprof %s, handler %s, eintr %d, read %d\n",
           prof_ticks > 0 ? "ticked" : "silent", now.sa_handler == on_prof ? "kept" : "lost", eintr,
           got);
  }
  printf("c[0] = %.1f\n", c[0]);
  return 0;
}
