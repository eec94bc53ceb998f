// A stand-in for the CUDA driver (libcuda.so.1): its presence is what tells sonde that a
// process uses CUDA. The CUPTI stub does the rest.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>

// As the real driver's cuInit does (CUPTI's injection samples rely on it): the library that
// CUDA_INJECTION64_PATH names is opened and its InitializeInjection called, once per process.
static void inject(void) {
  static int done;
  const char* path = getenv("CUDA_INJECTION64_PATH");
  if (done++ || path == NULL || *path == '\0') return;
  void* tool = dlopen(path, RTLD_NOW);
  int (*init)(void) = tool ? (int (*)(void))dlsym(tool, "InitializeInjection") : NULL;
  if (init != NULL) init();
}

int cuInit(unsigned int flags) {
  if (flags != 0) return 1;
  inject();
  return 0;
}
