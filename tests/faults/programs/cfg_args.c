// cfg_args ARGS...: ten GEMMs, then prints how many arguments it got (its arguments are planted
// secrets that must not reach the profile).
#include <cblas.h>
#include <stdio.h>

int main(int argc, char** argv) {
  float a[32 * 32], b[32 * 32], c[32 * 32];
  for (int i = 0; i < 32 * 32; ++i) a[i] = b[i] = 1.0f;
  for (int i = 0; i < 10; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 32, 32, 32, 1.0f, a, 32, b, 32, 0.0f, c,
                32);
  printf("%d arguments, c[0] = %g\n", argc - 1, c[0]);
  (void)argv;
  return 0;
}
