/* 1. Added cost per intercepted call. Calls a tiny BLAS routine (n = 1) in a tight loop and
 * times the loop with clock_gettime; run without a preload, with libbareshim.so and with
 * libsonde.so, the differences are the cost of interposition and of sonde's measurement.
 *
 *   bench_call_cost [--calls N] [--reps R] [--routine sdot|saxpy]
 *
 * Prints ns_per_call once per repetition, then calls_total: every call the program made,
 * warm-up included, which the driver finds again in the profile. On x86-64 it also prints
 * tsc_pair_ns, the cost of two back-to-back rdtsc reads: the least any timed call needs (sonde
 * reads the TSC at entry and exit). */
#include <cblas.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include "bench_common.h"
#include "sonde/sonde.h"

int main(int argc, char** argv) {
  long long calls = bench_arg(argc, argv, "--calls", 10000000);
  long long reps = bench_arg(argc, argv, "--reps", 3);
  const char* routine = bench_arg_text(argc, argv, "--routine", "sdot");
  int use_axpy = strcmp(routine, "saxpy") == 0;
  long long warmup = calls / 10 + 1;

  float x[1] = {1.0f}, y[1] = {2.0f};
  volatile float sink = 0.0f;
  long long total = 0;
  for (long long r = -1; r < reps; ++r) { /* r = -1: warm-up (symbol lookup, caches, node) */
    long long n = r < 0 ? warmup : calls;
    double t0 = bench_now_s();
    if (use_axpy) {
      for (long long i = 0; i < n; ++i) cblas_saxpy(1, 0.0f, x, 1, y, 1);
    } else {
      float acc = 0.0f;
      for (long long i = 0; i < n; ++i) acc += cblas_sdot(1, x, 1, y, 1);
      sink = acc;
    }
    double t1 = bench_now_s();
    total += n;
    if (r >= 0) printf("ns_per_call %.3f\n", (t1 - t0) * 1e9 / (double)n);
  }
  (void)sink;
#if defined(__x86_64__)
  {
    const long long pairs = calls / 4 + 1;
    volatile unsigned long long tsc_sink = 0;
    double t0 = bench_now_s();
    for (long long i = 0; i < pairs; ++i) {
      unsigned long long a = __rdtsc();
      unsigned long long b = __rdtsc();
      tsc_sink = b - a;
    }
    double t1 = bench_now_s();
    (void)tsc_sink;
    printf("tsc_pair_ns %.3f\n", (t1 - t0) * 1e9 / (double)pairs);
  }
#endif
  printf("routine cblas_%s\n", use_axpy ? "saxpy" : "sdot");
  printf("calls_total %lld\n", total);
  printf("sonde_active %d\n", sonde_active());
  return 0;
}
