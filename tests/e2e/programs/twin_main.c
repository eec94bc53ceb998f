/* Opens the two twin_user libraries RTLD_LOCAL (as Python opens extension modules), each linked
 * against its own twin_blas, and calls each `calls` times in turn: prints which library each
 * one's products reached ("a 1 b 2" without sonde). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: twin_main USER_A.so USER_B.so [calls]\n");
    return 2;
  }
  int calls = argc > 3 ? atoi(argv[3]) : 3;
  int (*gemm[2])(void);
  for (int i = 0; i < 2; ++i) {
    void* h = dlopen(argv[1 + i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
      fprintf(stderr, "twin_main: %s\n", dlerror());
      return 1;
    }
    *(void**)&gemm[i] = dlsym(h, "twin_user_gemm");
  }
  int reached[2] = {0, 0};
  for (int c = 0; c < calls; ++c)
    for (int i = 0; i < 2; ++i) {
      int r = gemm[i]();
      if (reached[i] != 0 && reached[i] != r)
        reached[i] = -1; /* changed between calls */
      else
        reached[i] = r;
    }
  printf("a %d b %d\n", reached[0], reached[1]);
  return 0;
}
