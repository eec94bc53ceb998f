// A program that, as a Python process running PyTorch does, reaches CUPTI only through a
// library it opened with RTLD_LOCAL (kineto_like, given as argv[1]): libcupti is never in the
// global scope. It loads the driver first (sonde starts CUPTI there), then starts the client.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == nullptr) std::printf("no driver\n");
  void* client = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (client == nullptr) {
    std::printf("no client: %s\n", dlerror());
    return 1;
  }
  auto start = reinterpret_cast<void (*)(char*, size_t)>(dlsym(client, "kineto_like_start"));
  char result[256] = {};
  start(result, sizeof result);
  std::printf("client %s\ndone local\n", result);
  return 0;
}
