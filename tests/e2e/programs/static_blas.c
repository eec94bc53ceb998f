/* Links OpenBLAS statically: LD_PRELOAD cannot reach its calls, and sonde must say so. */
#include <cblas.h>
#include <stdio.h>

int main(void) {
  float a[4] = {1, 2, 3, 4}, c[4] = {0};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.f, a, 2, a, 2, 0.f, c, 2);
  printf("c %.0f %.0f %.0f %.0f\n", c[0], c[1], c[2], c[3]);
  return 0;
}
