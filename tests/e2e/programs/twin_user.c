/* A library calling the BLAS it was linked against (twin_blas.c, built as twin_blas_a or _b)
 * through its PLT, as an extension module calls its own: returns the number of the library the
 * call reached. */
#include <stddef.h>

void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*,
            const float*, const int*, const float*, const int*, const float*, float*, const int*,
            size_t, size_t);

int twin_user_gemm(void) {
  float a[16] = {0}, b[16] = {0}, c[16] = {0};
  const int four = 4;
  const float one = 1, zero = 0;
  sgemm_("N", "N", &four, &four, &four, &one, a, &four, b, &four, &zero, c, &four, 1, 1);
  return (int)c[0];
}
