// An MPI host under a storm of timer signals whose handler siglongjmps out of wherever the thread
// is (issue 37), as longjmp_storm.c does to BLAS: for about a second a timer fires every 20 us
// while the one rank calls MPI_Allreduce in a loop, so thousands of jumps land inside the MPI
// wrapper, at every step of it. Then the timer stops and 1000 MPI_Barrier and 10 MPI_Bcast calls
// run, routines the storm never called: each is counted in the profile, whatever the jumps left.
// Run alone (MPI's singleton start), one rank.
#include <mpi.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

static sigjmp_buf g_back;
static volatile sig_atomic_t g_armed;
static pthread_t g_main;

static void on_alarm(int sig) {
  // The timer is the process's: a signal that reaches another thread (MPI's own) is passed on.
  if (!pthread_equal(pthread_self(), g_main)) {
    pthread_kill(g_main, sig);
    return;
  }
  if (!g_armed) return;
  g_armed = 0;  // until the next sigsetjmp has saved where to come back to
  siglongjmp(g_back, 1);
}

static double seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  g_main = pthread_self();
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  // The first call binds the symbols and sets the collective up: not to be interrupted.
  double one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  volatile double first = sum;
  volatile long jumps = 0, finished = 0;
  struct itimerval storm = {{0, 20}, {0, 20}};
  setitimer(ITIMER_REAL, &storm, NULL);
  double end = seconds() + 1.0;
  while (seconds() < end) {
    if (sigsetjmp(g_back, 1) != 0) {
      ++jumps;
      continue;
    }
    g_armed = 1;
    for (int i = 0; i < 100; ++i) {
      MPI_Allreduce(&one, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      ++finished;
    }
    g_armed = 0;
  }
  g_armed = 0;
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  for (int i = 0; i < 1000; ++i) MPI_Barrier(MPI_COMM_WORLD);
  double value = 0;
  for (int i = 0; i < 10; ++i) {
    value = i + 1;
    MPI_Bcast(&value, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  // What the timer's luck decides on stderr, the rest on stdout, the same under sonde.
  fprintf(stderr, "jumps %ld allreduce %ld finished\n", jumps, finished);
  printf("allreduce %s, then barrier 1000, bcast 10 (%.0f)\n", first == 1 ? "right" : "wrong",
         value);
  MPI_Finalize();
  return 0;
}
