/* Helpers shared by the benchmark programs: argument parsing, a monotonic clock, peak RSS.
 * Every program prints its results as "key value" lines on stdout for run_benchmarks.py. */
#ifndef SONDE_BENCH_COMMON_H
#define SONDE_BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static inline double bench_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU time of the calling thread: on a loaded machine, the figure wall time cannot give. */
static inline double bench_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Minor page faults of the process so far (its other threads wait while it flushes). */
static inline long bench_minor_faults(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

/* Value of "--name V" in argv, or `fallback`. */
static inline long long bench_arg(int argc, char** argv, const char* name, long long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], name) == 0) return atoll(argv[i + 1]);
  }
  return fallback;
}

static inline const char* bench_arg_text(int argc, char** argv, const char* name,
                                         const char* fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  }
  return fallback;
}

/* Peak resident set of this process so far, in KiB (VmHWM), or -1. */
static inline long bench_peak_rss_kib(void) {
  FILE* f = fopen("/proc/self/status", "r");
  if (f == NULL) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "VmHWM:", 6) == 0) {
      kib = atol(line + 6);
      break;
    }
  }
  fclose(f);
  return kib;
}

/* Distinct, immortal region names "<prefix><i>" (sonde keys regions by pointer). */
static inline char** bench_names(const char* prefix, long count) {
  char** names = (char**)malloc(sizeof(char*) * (size_t)count);
  for (long i = 0; i < count; ++i) {
    char buf[64];
    snprintf(buf, sizeof buf, "%s%06ld", prefix, i);
    names[i] = strdup(buf);
  }
  return names;
}

#endif
