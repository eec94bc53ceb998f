// A storm of timer signals whose handler siglongjmps out of wherever the main thread is (issue
// 37), shared by the hosts that drive it through BLAS (longjmp_storm.c) and MPI
// (mpi/longjmp_mpi.c): for about a second a timer fires every 20 us while `call` runs in a loop,
// so thousands of jumps land inside the wrapper it reaches, at every step of it.
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
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

// The handler for SIGALRM on the calling (main) thread, on a sigaltstack when `altstack`.
static void storm_prepare(int altstack) {
  g_main = pthread_self();
  if (altstack) {
    static char stack[1 << 16];
    stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sa.sa_flags = altstack ? SA_ONSTACK : 0;
  sigaction(SIGALRM, &sa, NULL);
}

// One second of storm over `call`; returns the jumps, `*finished` the calls that returned.
static long storm_run(void (*call)(void), long* finished) {
  volatile long jumps = 0, done = 0;
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
      call();
      ++done;
    }
    g_armed = 0;
  }
  g_armed = 0;
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &off, NULL);
  *finished = done;
  return jumps;
}
