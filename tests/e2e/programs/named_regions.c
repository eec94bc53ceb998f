// One region per argument, named by it, each around a few GEMMs: a profile with routine names
// chosen by the test (markup, quotes, anything a renderer could trip over).
#include <cblas.h>
#include <sonde/sonde.h>
#include <stdio.h>

int main(int argc, char** argv) {
  static float a[64 * 64], b[64 * 64], c[64 * 64];
  for (int i = 0; i < 64 * 64; ++i) a[i] = b[i] = 1.0f;
  for (int r = 1; r < argc; ++r) {
    sonde_region_begin(argv[r]);
    for (int i = 0; i < 10; ++i)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 64, 64, 64, 1.0f, a, 64, b, 64, 0.0f,
                  c, 64);
    // Some time of the region's own, so that its own line is in the folded stacks: the loop
    // alone left it at 0 ns on a loaded machine once the calls' timer cost was taken out, and
    // the golden file lost two lines (a clean-clone CI run).
    for (volatile int spin = 0; spin < 20000; ++spin) {
    }
    sonde_region_end(argv[r]);
  }
  printf("c[0] = %g\n", c[0]);
  return 0;
}
