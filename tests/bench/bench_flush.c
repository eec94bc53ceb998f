/* 4. Cost of writing many call paths. Creates `paths` distinct call paths, each entered once,
 * then times one sonde_flush() (wall and the thread's CPU time): the first flush writes every
 * node row (and every new routine).
 * A second flush, which updates the same rows, is timed too. Run with SONDE_FLUSH_INTERVAL=0.
 *
 *   --fanout 0 (flat): regions "f<i>" directly under the thread root, `paths` distinct names,
 *                      so also `paths` new routines.
 *   --fanout F:        paths/F regions "g<i>", each holding regions "f0".."f<F-1>" (names
 *                      shared), so paths + paths/F nodes but only paths/F + F routines.
 *   --blas-every K:    one cblas_sdot call inside every K-th leaf region (0: none).
 *
 *   bench_flush [--paths N] [--fanout F] [--blas-every K] */
#include <cblas.h>

#include "bench_common.h"
#include "sonde/sonde.h"

int main(int argc, char** argv) {
  long long paths = bench_arg(argc, argv, "--paths", 100000);
  long long fanout = bench_arg(argc, argv, "--fanout", 0);
  long long blas_every = bench_arg(argc, argv, "--blas-every", 0);
  if (fanout > 0 && paths % fanout != 0) {
    fprintf(stderr, "bench_flush: --paths must be a multiple of --fanout\n");
    return 2;
  }
  long long groups = fanout > 0 ? paths / fanout : 0;
  char** names = bench_names("f", fanout > 0 ? fanout : paths);
  char** group_names = bench_names("g", groups);
  float x[1] = {1.0f}, y[1] = {2.0f};
  volatile float sink = 0.0f;
  long long blas_calls = 0;
  double t0 = bench_now_s();
  for (long long p = 0; p < paths; ++p) {
    const char* leaf = fanout > 0 ? names[p % fanout] : names[p];
    if (fanout > 0 && p % fanout == 0) sonde_region_begin(group_names[p / fanout]);
    sonde_region_begin(leaf);
    if (blas_every > 0 && p % blas_every == 0) {
      sink = cblas_sdot(1, x, 1, y, 1);
      ++blas_calls;
    }
    sonde_region_end(leaf);
    if (fanout > 0 && p % fanout == fanout - 1) sonde_region_end(group_names[p / fanout]);
  }
  /* Page faults beside the times: each first touch of a page is a kernel entry, and on a
   * paravirtualised VM one cost about 15 us (docs/performance.md). */
  double t1 = bench_now_s(), c1 = bench_cpu_s();
  long f1 = bench_minor_faults();
  int s1 = sonde_flush();
  double t2 = bench_now_s(), c2 = bench_cpu_s();
  long f2 = bench_minor_faults();
  int s2 = sonde_flush();
  double t3 = bench_now_s(), c3 = bench_cpu_s();
  long f3 = bench_minor_faults();
  (void)sink;
  printf("paths %lld\n", paths);
  printf("fanout %lld\n", fanout);
  printf("blas_calls %lld\n", blas_calls);
  printf("create_s %.4f\n", t1 - t0);
  printf("flush1_s %.4f\n", t2 - t1);
  printf("flush2_s %.4f\n", t3 - t2);
  printf("flush1_cpu_s %.4f\n", c2 - c1);
  printf("flush2_cpu_s %.4f\n", c3 - c2);
  printf("flush1_faults %ld\n", f2 - f1);
  printf("flush2_faults %ld\n", f3 - f2);
  printf("flush_status %d %d\n", s1, s2);
  printf("sonde_active %d\n", sonde_active());
  return 0;
}
