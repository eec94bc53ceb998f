// A CUDA program without a GPU: it makes the API calls and GPU work that the CUPTI stub
// (tests/stubs/cupti) turns into callbacks and activity records, inside sonde regions, so the
// test can check where each kernel and copy lands. Built twice: opening the driver with dlopen
// (as libcudart does) and linked against it (CUDA_LINKED).
//   cupti_app basic     kernels and copies in two regions, a direct driver launch, CPU work
//   cupti_app periodic  kernels spread over several periodic flushes
//   cupti_app late      a thread launches and ends; its kernel's record comes after a flush
//   cupti_app midcall   a runtime call that opens the driver: its exit comes without its entry
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "sonde/sonde.h"

extern "C" {
int cupti_stub_api(int domain, uint32_t cbid, uint32_t correlation, const void* params, int enter,
                   uint64_t* slot);
uint64_t cupti_stub_now(void);
void cupti_stub_kernel(uint32_t correlation, const char* name, uint64_t start, uint64_t end,
                       int grid_x, int block_x, int registers);
void cupti_stub_memcpy(uint32_t correlation, int copy_kind, uint64_t bytes, uint64_t start,
                       uint64_t end);
void cupti_stub_memset(uint32_t correlation, uint64_t bytes, uint64_t start, uint64_t end);
}

namespace {

uint32_t g_correlation = 1000;  // CUPTI numbers every API call; one thread makes them here
constexpr uint64_t kMs = 1000000;

// One runtime launch: the runtime calls the driver inside, with a correlation id of its own;
// the kernel's record carries the runtime call's id, as CUPTI's do. Returns that id.
uint32_t launch_call() {
  uint32_t c = ++g_correlation;
  uint64_t slot = 0, inner_slot = 0;
  cudaLaunchKernel_v7000_params p{};
  cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, c,
                 &p, 1, &slot);
  uint32_t inner = ++g_correlation;
  cupti_stub_api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, inner, nullptr,
                 1, &inner_slot);
  cupti_stub_api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, inner, nullptr,
                 0, &inner_slot);
  cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, c,
                 &p, 0, &slot);
  return c;
}

void launch(const char* kernel, uint64_t duration, int grid, int block, int registers) {
  uint32_t c = launch_call();
  uint64_t t = cupti_stub_now();
  cupti_stub_kernel(c, kernel, t, t + duration, grid, block, registers);
}

void copy(cudaMemcpyKind kind, size_t bytes) {
  static char host[16];
  uint32_t c = ++g_correlation;
  uint64_t slot = 0;
  cudaMemcpy_v3020_params p{host, host, bytes, kind};
  cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, c, &p, 1,
                 &slot);
  cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, c, &p, 0,
                 &slot);
  int copy_kind = kind == cudaMemcpyHostToDevice   ? CUPTI_ACTIVITY_MEMCPY_KIND_HTOD
                  : kind == cudaMemcpyDeviceToHost ? CUPTI_ACTIVITY_MEMCPY_KIND_DTOH
                                                   : CUPTI_ACTIVITY_MEMCPY_KIND_DTOD;
  uint64_t t = cupti_stub_now();
  cupti_stub_memcpy(c, copy_kind, bytes, t, t + kMs / 2);
}

void spin(double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

void* late_worker(void* out) {
  sonde_region_begin("worker");
  *static_cast<uint32_t*>(out) = launch_call();
  sonde_region_end("worker");
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "basic";
  uint32_t first_call = ++g_correlation;
  uint64_t first_slot = 0xdeadbeefull;  // what CUPTI leaves there is not sonde's to trust
  cudaLaunchKernel_v7000_params first_params{};
  if (std::strcmp(mode, "midcall") == 0) {
    // libcudart's first call opens the driver: CUPTI starts inside it and sees only its exit.
    cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                   first_call, &first_params, 1, &first_slot);
  }
#ifdef CUDA_LINKED
  cuInit(0);  // a reference, so the linker keeps libcuda.so.1 among the program's needs
#else
  // What libcudart does at its first call.
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL) == nullptr) std::printf("no driver\n");
#endif
  auto traced =
      reinterpret_cast<bool (*)()>(dlsym(RTLD_DEFAULT, "_ZN5sonde23gpu_api_traced_by_cuptiEv"));
  std::printf("traced_by_cupti=%d\n", traced != nullptr && traced() ? 1 : 0);

  if (std::strcmp(mode, "midcall") == 0) {
    cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                   first_call, &first_params, 0, &first_slot);
    sonde_region_begin("after");
    launch("_Z5afterv", kMs, 1, 32, 8);
    uint64_t slot = 0;
    uint32_t d = ++g_correlation;  // a direct driver launch: the runtime call above is over
    cupti_stub_api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, d, nullptr,
                   1, &slot);
    cupti_stub_api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, d, nullptr,
                   0, &slot);
    sonde_region_end("after");
  } else if (std::strcmp(mode, "basic") == 0) {
    for (int step = 0; step < 3; ++step) {
      sonde_region_begin("train_step");
      copy(cudaMemcpyHostToDevice, 1 << 20);
      launch("_Z6matmulPfS_S_i", 2 * kMs, 128, 256, 32);
      sonde_region_end("train_step");
    }
    sonde_region_begin("eval");
    launch("_Z4reluPfi", kMs, 64, 128, 16);
    launch("_Z4reluPfi", kMs, 64, 128, 16);
    copy(cudaMemcpyDeviceToHost, 4096);
    uint32_t c = ++g_correlation;
    uint64_t slot = 0;
    cudaMemset_v3020_params ms{nullptr, 0, 512};
    cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, c, &ms,
                   1, &slot);
    cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, c, &ms,
                   0, &slot);
    uint64_t t = cupti_stub_now();
    cupti_stub_memset(c, 512, t, t + kMs / 4);
    sonde_region_end("eval");
    // A driver launch made directly (as Triton does), not from inside the runtime.
    sonde_region_begin("direct");
    uint32_t d = ++g_correlation;
    cupti_stub_api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, d, nullptr,
                   1, &slot);
    cupti_stub_api(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, d, nullptr,
                   0, &slot);
    t = cupti_stub_now();
    cupti_stub_kernel(d, "_Z9directKerv", t, t + kMs, 1, 32, 8);
    sonde_region_end("direct");
    sonde_region_begin("cpu_work");
    spin(0.03);
    sonde_region_end("cpu_work");
  } else if (std::strcmp(mode, "periodic") == 0) {
    for (int i = 0; i < 8; ++i) {
      sonde_region_begin("step");
      launch("_Z4stepv", kMs, 8, 64, 24);
      sonde_region_end("step");
      usleep(60000);  // with SONDE_FLUSH_INTERVAL=0.1: a flush every other step
    }
  } else if (std::strcmp(mode, "late") == 0) {
    uint32_t correlation = 0;
    pthread_t thread;
    pthread_create(&thread, nullptr, late_worker, &correlation);
    pthread_join(thread, nullptr);
    usleep(400000);  // with SONDE_FLUSH_INTERVAL=0.1 the ended thread is written and freed
    uint64_t t = cupti_stub_now();
    cupti_stub_kernel(correlation, "_Z4latev", t, t + kMs, 4, 32, 8);
  }
  std::printf("done %s\n", mode);
  return 0;
}
