/* Runs with ctor_blas.so, whose constructor already used BLAS before main. */
#include <cblas.h>
#include <stdio.h>

void ctor_blas_report(void);

int main(void) {
  float x[2] = {1, 1};
  ctor_blas_report();
  printf("main %.0f\n", cblas_sdot(2, x, 1, x, 1));
  return 0;
}
