/* wheel_blas_user's products from a program linked against the wheel's BLAS names (the
 * LD_PRELOAD path: sonde run). Prints the checksum, the same with and without sonde. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

double run_products(int64_t m, int64_t n, int64_t k, int reps);

int main(int argc, char** argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: wheel_blas_main M N K REPS\n");
    return 2;
  }
  double sum = run_products(atoll(argv[1]), atoll(argv[2]), atoll(argv[3]), atoi(argv[4]));
  printf("checksum %.6f\n", sum);
  return 0;
}
