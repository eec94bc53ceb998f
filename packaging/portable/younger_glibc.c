/* The functions and objects younger than glibc 2.28 that sonde's shipped binaries reach, for
 * the builds portable.cmake links against glibc 2.31 with libstdc++ built in: each binary gets
 * its own, hidden, so that a program's own glibc definitions are never replaced, and the
 * binaries ask for no symbol version above 2.28 (the wheel's manylinux_2_28 tag, computed by
 * packaging/wheel/elf_deps.py from what they ask for). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define HIDDEN __attribute__((visibility("hidden")))

/* glibc 2.32. libstdc++ (its archive, and the inline code its headers put in sonde's objects)
 * reads it to skip atomic reference counting while a process has one thread. Always 0 here:
 * "may have threads", right in every process, at the cost of an atomic add where a plain one
 * would do. */
HIDDEN char __libc_single_threaded = 0;

/* glibc 2.36. Only std::random_device("default") calls it, which sonde does not use; the
 * archive member that holds random_device comes in with the copy-on-write string that
 * std::runtime_error keeps. The kernel's random bytes, as glibc's own does. */
HIDDEN uint32_t arc4random(void) {
  uint32_t value = 0;
  while (syscall(SYS_getrandom, &value, sizeof value, 0) != (long)sizeof value) {
  }
  return value;
}

/* glibc 2.29 gave exp, log, log2 and pow new versions (the same functions without the SVID
 * error handling); the old versions stay in every glibc. Called by SQLite's SQL functions and
 * sonde's own figures. */
double sonde_exp_2_2_5(double);
double sonde_log_2_2_5(double);
double sonde_log2_2_2_5(double);
double sonde_pow_2_2_5(double, double);
__asm__(".symver sonde_exp_2_2_5,exp@GLIBC_2.2.5");
__asm__(".symver sonde_log_2_2_5,log@GLIBC_2.2.5");
__asm__(".symver sonde_log2_2_2_5,log2@GLIBC_2.2.5");
__asm__(".symver sonde_pow_2_2_5,pow@GLIBC_2.2.5");
HIDDEN double exp(double x) { return sonde_exp_2_2_5(x); }
HIDDEN double log(double x) { return sonde_log_2_2_5(x); }
HIDDEN double log2(double x) { return sonde_log2_2_2_5(x); }
HIDDEN double pow(double x, double y) { return sonde_pow_2_2_5(x, y); }

/* glibc 2.30: a condition wait against a clock of the caller's choosing, which libstdc++'s
 * headers use for std::condition_variable's waits on steady_clock. glibc's own where the running
 * one has it (looked up as the binary loads, never on a thread that must leave the loader
 * alone); before 2.30, the same deadline moved to CLOCK_REALTIME, the clock a default condition
 * variable measures: a wall-clock step during the wait shortens or lengthens it. */
typedef int (*clockwait_fn)(pthread_cond_t*, pthread_mutex_t*, clockid_t, const struct timespec*);
static clockwait_fn g_clockwait;

__attribute__((constructor)) static void resolve_clockwait(void) {
  g_clockwait = (clockwait_fn)dlvsym(RTLD_DEFAULT, "pthread_cond_clockwait", "GLIBC_2.30");
}

HIDDEN int sonde_clockwait_by_realtime(pthread_cond_t* cond, pthread_mutex_t* mutex,
                                       clockid_t clock, const struct timespec* deadline) {
  if (clock == CLOCK_REALTIME) return pthread_cond_timedwait(cond, mutex, deadline);
  struct timespec now, real;
  if (clock_gettime(clock, &now) != 0 || clock_gettime(CLOCK_REALTIME, &real) != 0) return EINVAL;
  int64_t left =
      (int64_t)(deadline->tv_sec - now.tv_sec) * 1000000000 + (deadline->tv_nsec - now.tv_nsec);
  if (left < 0) left = 0;
  int64_t at = (int64_t)real.tv_nsec + left % 1000000000;
  struct timespec moved = {real.tv_sec + left / 1000000000 + at / 1000000000, at % 1000000000};
  return pthread_cond_timedwait(cond, mutex, &moved);
}

HIDDEN int pthread_cond_clockwait(pthread_cond_t* cond, pthread_mutex_t* mutex, clockid_t clock,
                                  const struct timespec* deadline) {
  if (g_clockwait != NULL) return g_clockwait(cond, mutex, clock, deadline);
  return sonde_clockwait_by_realtime(cond, mutex, clock, deadline);
}
