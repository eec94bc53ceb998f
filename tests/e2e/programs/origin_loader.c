/* dlopen by bare name, relying on this executable's RUNPATH with $ORIGIN: under a preload that
 * made itself the caller of dlopen, the lookup would use the wrong RUNPATH and fail. */
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
  void* h = dlopen("liborigin_dep.so", RTLD_NOW);
  if (!h) {
    printf("failed: %s\n", dlerror());
    return 1;
  }
  int (*answer)(void) = (int (*)(void))dlsym(h, "origin_dep_answer");
  printf("loaded %d\n", answer ? answer() : -1);
  return 0;
}
