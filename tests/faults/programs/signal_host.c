// A host that meets a signal after 10 GEMMs, in the way MODE names, for the signals group.
// signal_host MODE [SIGNAL]
//   default    raise(SIGNAL) at its default disposition
//   chain      a handler that chains to the handler it replaced (old.sa_sigaction(...), or
//              signal(SIG_DFL) + raise when it replaced the default), as crash reporters do
//   reraise    a handler that prints, restores SIG_DFL with signal() and raises again
//   resethand  an SA_RESETHAND handler that prints and raises again
//   replace    a handler that prints and exits 5
//   blocked    SIGNAL blocked, raised (stays pending), 10 more GEMMs, then unblocked
//   ignored    SIGNAL set to SIG_IGN and raised: nothing happens, exit 0
//   segv       a real segmentation fault, with a chaining SIGSEGV handler when SIGNAL is 11
//   abort      abort(), with a SIGABRT handler that prints and returns when SIGNAL is 6
//   pipe       writes lines to stdout until the reader goes away (SIGPIPE)
//   alarm      ITIMER_REAL (SIGALRM), or ITIMER_VIRTUAL while spinning (SIGVTALRM) if SIGNAL
//              is 26, and no handler
//   wait       prints "ready" and sleeps until a signal ends it (at most 20 s, then exit 9)
//   query      prints every signal's disposition as sigaction(sig, NULL, &old) reports it
#include <cblas.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static struct sigaction g_old;
static volatile sig_atomic_t g_calls;

static void gemms(int n) {
  static float a[64 * 64], b[64 * 64], c[64 * 64];
  for (int i = 0; i < 64 * 64; ++i) a[i] = b[i] = 1.0f;
  for (int i = 0; i < n; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, a, 64, b, 64, 0.0f, c,
                64);
}

static void say(const char* s) { (void)!write(STDOUT_FILENO, s, strlen(s)); }

// Bounded, so that a loop between handlers fails the cell in milliseconds instead of hanging it.
static void count_call(void) {
  if (++g_calls > 1000) {
    say("handler looped\n");
    _exit(99);
  }
}

static void chain(int sig, siginfo_t* info, void* ctx) {
  count_call();
  if (g_calls == 1) say("chain handler\n");
  if (g_old.sa_flags & SA_SIGINFO) {
    g_old.sa_sigaction(sig, info, ctx);
  } else if (g_old.sa_handler == SIG_DFL) {
    signal(sig, SIG_DFL);
    raise(sig);
  } else if (g_old.sa_handler != SIG_IGN) {
    g_old.sa_handler(sig);
  }
}

static void reraise(int sig) {
  count_call();
  say("reraise handler\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

static void resethand(int sig) {
  count_call();
  say("resethand handler\n");
  raise(sig);
}

static void replace(int sig) {
  (void)sig;
  say("replace handler\n");
  exit(5);
}

static void returns(int sig) {
  (void)sig;
  count_call();
  say("returning handler\n");
}

static void install(int sig, void (*handler)(int), int flags) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, &g_old);
}

static void query(void) {
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old;
    if (sigaction(sig, NULL, &old) != 0) {
      printf("%d error\n", sig);
      continue;
    }
    void* h = (old.sa_flags & SA_SIGINFO) ? (void*)old.sa_sigaction : (void*)old.sa_handler;
    printf("%d %s\n", sig,
           h == (void*)SIG_DFL   ? "default"
           : h == (void*)SIG_IGN ? "ignored"
                                 : "handler");
  }
  // signal() reports the same, and what it installs is what a later query returns.
  void (*was)(int) = signal(SIGTERM, replace);
  struct sigaction now;
  sigaction(SIGTERM, NULL, &now);
  printf("signal: was %s, now %s\n", was == SIG_DFL ? "default" : "other",
         now.sa_handler == replace ? "replace" : "other");
  signal(SIGTERM, was);
  sigaction(SIGTERM, NULL, &now);
  printf("restored: %s\n", now.sa_handler == SIG_DFL ? "default" : "other");
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "default";
  int sig = argc > 2 ? atoi(argv[2]) : SIGTERM;
  if (strcmp(mode, "query") == 0) {
    query();
    return 0;
  }
  gemms(10);
  say("gemms done\n");
  if (strcmp(mode, "chain") == 0 || strcmp(mode, "segv") == 0) {
    if (strcmp(mode, "chain") == 0 || sig == SIGSEGV) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_sigaction = chain;
      sa.sa_flags = SA_SIGINFO;
      sigemptyset(&sa.sa_mask);
      sigaction(sig, &sa, &g_old);
    }
    if (strcmp(mode, "segv") == 0) *(volatile int*)(argc > 100 ? argv : NULL) = 1;
    raise(sig);
  } else if (strcmp(mode, "reraise") == 0) {
    install(sig, reraise, 0);
    raise(sig);
  } else if (strcmp(mode, "resethand") == 0) {
    install(sig, resethand, SA_RESETHAND);
    raise(sig);
  } else if (strcmp(mode, "replace") == 0) {
    install(sig, replace, 0);
    raise(sig);
  } else if (strcmp(mode, "blocked") == 0) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigprocmask(SIG_BLOCK, &set, NULL);
    raise(sig);
    say("pending\n");
    gemms(10);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
  } else if (strcmp(mode, "ignored") == 0) {
    signal(sig, SIG_IGN);
    raise(sig);
    say("ignored\n");
    return 0;
  } else if (strcmp(mode, "abort") == 0) {
    if (sig == SIGABRT) install(SIGABRT, returns, 0);
    abort();
  } else if (strcmp(mode, "pipe") == 0) {
    for (int i = 0; i < 1000000; ++i) printf("line %d\n", i);
    return 0;
  } else if (strcmp(mode, "alarm") == 0) {
    struct itimerval t = {{0, 0}, {0, 50000}};
    setitimer(sig == SIGVTALRM ? ITIMER_VIRTUAL : ITIMER_REAL, &t, NULL);
    for (volatile unsigned long i = 0; i < 20000000000UL; ++i) {
    }
  } else if (strcmp(mode, "wait") == 0) {
    say("ready\n");
    for (int i = 0; i < 200; ++i) usleep(100000);
    return 9;
  } else {
    raise(sig);
  }
  say("survived\n");
  return 0;
}
