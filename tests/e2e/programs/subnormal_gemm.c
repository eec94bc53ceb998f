/* Ten float GEMMs whose operands are all subnormal ("subnormal"), all normal ("normal"), or
 * normal with subnormal products ("products": 1e-20 x 1e-20).
 * Usage: subnormal_gemm subnormal|normal|products */
#include <cblas.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  float v = strcmp(argv[1], "subnormal") == 0  ? 1e-40f
            : strcmp(argv[1], "products") == 0 ? 1e-20f
                                               : 1.0f;
  enum { n = 64 };
  static float a[n * n], b[n * n], c[n * n];
  for (int i = 0; i < n * n; ++i) a[i] = b[i] = v;
  for (int r = 0; r < 10; ++r) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
  }
  printf("c %g\n", c[0]);
  return 0;
}
