/* libbareshim.so: the cheapest possible interposer, the floor sonde's per-call cost is measured
 * against. It exports the routines bench_call_cost calls and forwards each to the next
 * definition (OpenBLAS), looked up once with dlsym(RTLD_NEXT) and cached in a static pointer.
 * No measurement, no thread-local state, no errno handling. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef float (*SdotFn)(int, const float*, int, const float*, int);
typedef void (*SaxpyFn)(int, float, const float*, int, float*, int);

static void* next_symbol(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == NULL) __builtin_trap(); /* the program called it, so it must exist */
  return fn;
}

__attribute__((visibility("default"))) float cblas_sdot(int n, const float* x, int incx,
                                                        const float* y, int incy) {
  static SdotFn real;
  if (__builtin_expect(real == NULL, 0)) real = (SdotFn)next_symbol("cblas_sdot");
  return real(n, x, incx, y, incy);
}

__attribute__((visibility("default"))) void cblas_saxpy(int n, float alpha, const float* x,
                                                        int incx, float* y, int incy) {
  static SaxpyFn real;
  if (__builtin_expect(real == NULL, 0)) real = (SaxpyFn)next_symbol("cblas_saxpy");
  real(n, alpha, x, incx, y, incy);
}
