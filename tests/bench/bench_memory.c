/* 3. Memory bounded by distinct call paths. Makes `calls` intercepted BLAS calls spread over
 * `paths` distinct call paths (region "m<i>" -> cblas_sdot), visiting every path `rounds`
 * times, then reports its peak RSS. Run with and without libsonde.so; the difference is what
 * sonde's tree, tables and library cost in memory.
 *
 *   bench_memory [--calls N] [--paths P] [--rounds R]
 *
 * calls must be a multiple of paths * rounds (the driver makes it so). */
#include <cblas.h>

#include "bench_common.h"
#include "sonde/sonde.h"

int main(int argc, char** argv) {
  long long calls = bench_arg(argc, argv, "--calls", 10000000);
  long long paths = bench_arg(argc, argv, "--paths", 1000);
  long long rounds = bench_arg(argc, argv, "--rounds", 10);
  long long per_visit = calls / (paths * rounds);
  if (per_visit < 1 || per_visit * paths * rounds != calls) {
    fprintf(stderr, "bench_memory: --calls must be a multiple of --paths * --rounds\n");
    return 2;
  }
  char** names = bench_names("m", paths);
  float x[1] = {1.0f}, y[1] = {2.0f};
  volatile float sink = 0.0f;
  long rss_start = bench_peak_rss_kib();
  double t0 = bench_now_s();
  long long total = 0;
  for (long long r = 0; r < rounds; ++r) {
    for (long long p = 0; p < paths; ++p) {
      sonde_region_begin(names[p]);
      float acc = 0.0f;
      for (long long i = 0; i < per_visit; ++i) acc += cblas_sdot(1, x, 1, y, 1);
      sink = acc;
      sonde_region_end(names[p]);
      total += per_visit;
    }
  }
  double t1 = bench_now_s();
  long rss_loop = bench_peak_rss_kib();
  int flushed = sonde_flush(); /* the writing costs memory too: include it in the peak */
  long rss_flush = bench_peak_rss_kib();
  (void)sink;
  printf("calls_total %lld\n", total);
  printf("paths %lld\n", paths);
  printf("loop_s %.3f\n", t1 - t0);
  printf("peak_rss_start_kib %ld\n", rss_start);
  printf("peak_rss_loop_kib %ld\n", rss_loop);
  printf("peak_rss_kib %ld\n", rss_flush);
  printf("flush_status %d\n", flushed);
  printf("sonde_active %d\n", sonde_active());
  return 0;
}
