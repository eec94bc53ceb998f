// A CUDA program without a GPU: it makes the API calls and GPU work that the CUPTI stub
// (tests/stubs/cupti) turns into callbacks and activity records, inside sonde regions, so the
// test can check where each kernel and copy lands. Built twice: opening the driver with dlopen
// (as libcudart does) and linked against it (CUDA_LINKED).
//   cupti_app basic     kernels and copies in two regions, a direct driver launch, CPU work
//   cupti_app periodic  kernels spread over several periodic flushes
//   cupti_app late      a thread launches and ends; its kernel's record comes after a flush
//   cupti_app midcall   a runtime call that opens the driver: its exit comes without its entry
//   cupti_app metrics   kernels whose metrics the stub's range profiler reports (SONDE_GPU_METRICS)
//   cupti_app metrics_threads  two threads launching on one context at the same time
//   cupti_app metrics_nan  a launch whose ratio metrics evaluate to NaN (nothing to divide)
//   cupti_app metrics_early  a kernel's record is flushed before its launch's exit decodes it
//   cupti_app metrics_reset  the context is destroyed and made again with the same handle
//   cupti_app metrics_threads_swapped  as metrics_threads, the later launch's kernel first
//   cupti_app metrics_capture  a launch during a stream capture, then the captured graph runs
//   cupti_app metrics_waits  an NCCL kernel and a cooperative launch
//   cupti_app context  a context is created before any launch on it
//   cupti_app nvcc13  a kernel<<<...>>> as nvcc 13 compiles it (__cudaLaunchKernel)
//   cupti_app graph   one cudaGraphLaunch whose kernels' records arrive over several flushes
//   cupti_app graph_capture N  a graph captured in two regions, instantiated and replayed N
//                   times, over flushes, then destroyed before the last flush; one built with
//                   cudaGraphAddKernelNode, replayed twice
//   cupti_app graph_many  a capture of more graph nodes than sonde keeps origins for
//   cupti_app kineto  a second activity client registers its buffers and disables kernels
//   cupti_app kineto_subscribes  torch.profiler's Kineto as it starts: it subscribes first
//   cupti_app kineto_leaves  torch.profiler's window: Kineto subscribes, then stops (disable,
//                   flush, unsubscribe) and the program launches again
//   cupti_app kineto_finalizes  the same window, ended with cuptiFinalize
//   cupti_app kineto_first  the other client registers its buffers before the driver loads
//   cupti_app v2_client  a window traced by a second tool through CUDA 13.3's subscriber-scope
//                   calls (Nsight Systems, a CUPTI-Python or JAX profiler): both tools get the
//                   window's records
//   cupti_app disable  a library disables kernel records mid-run
//   cupti_app teardown  the context is destroyed in an exit handler, as libcudart's does
//   cupti_app peer    a copy between two GPUs (a MEMCPY2 record)
//   cupti_app newer_api  a callback id past sonde's tables, then a launch
//   cupti_app breakdown  4 training steps whose copies and kernels, an NCCL one among them, run
//                   at known device times (the host waits for each step's work to end)
// Built a third time against the CUDA 12 stub (cupti_app12); CUPTI_APP_RUNTIME names a file
// the program loads first as its CUDA runtime.
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "cupti_stub_control.h"
#include "sonde/sonde.h"

// Weak: the CUDA 12 build (cupti_app12) links a CUPTI without it (v2_client mode only).
#pragma weak cuptiSubscribe_v2

namespace {

std::atomic<uint32_t> g_correlation{1000};  // CUPTI numbers every API call
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

// A launch whose kernel runs from `start` to `end` on the stub's clock (queued behind others).
void launch_at(const char* kernel, uint64_t start, uint64_t end) {
  cupti_stub_kernel(launch_call(), kernel, start, end, 64, 256, 32);
}

// What the stub's range profiler reports for a kernel (the TAU set and two throughputs).
constexpr uintptr_t kContext = 0x1000;  // the stub's default context
const char* const kMetricNames[] = {
    "smsp__warps_launched.sum",
    "smsp__inst_executed.sum",
    "smsp__inst_executed_op_global_ld.sum",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__time_duration.sum"};
struct KernelMetrics {
  double warps, inst, gld, sm_pct, mem_pct;
};

// The runtime's launch of `kernel` (its mangled name, as CUPTI reports it) between whose entry
// and exit the GPU runs it, as kernel replay does; `run` false: the launch fails.
struct MetricLaunch {
  uint32_t c = 0;
  uint64_t slot = 0;
  cudaLaunchKernel_v7000_params p{};
  const char* kernel;
  uint32_t cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  void enter() {
    c = ++g_correlation;
    cupti_stub_api_ex(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, c, &p, 1, &slot, kernel, kContext);
  }
  // The kernel runs, `duration` ns as the range profiler times it (its activity record then has
  // no timestamps: the duration given to exit() is what an unprofiled run would have).
  void run(const KernelMetrics& m, uint64_t duration = kMs) {
    double values[] = {m.warps, m.inst, m.gld, m.sm_pct, m.mem_pct, double(duration)};
    if (cupti_stub_kernel_run(kContext, kernel, kMetricNames, values, 6) != 1) {
      std::printf("kernel %s ran outside a range\n", kernel);
    }
  }
  void exit(uint64_t duration) {  // 0: the launch failed and left no record
    cupti_stub_api_ex(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, c, &p, 0, &slot, kernel, kContext);
    if (duration == 0) return;
    uint64_t t = cupti_stub_now();
    cupti_stub_kernel(c, kernel, t, t + duration, 64, 256, 32);
  }
};

void metric_launch(const char* kernel, const KernelMetrics& m, uint64_t duration) {
  MetricLaunch l{.kernel = kernel};
  l.enter();
  l.run(m, duration);
  l.exit(duration);
}

// Two threads launch on one context: their entries come first, then both kernels run, then
// both exits: one decode holds both ranges.
std::atomic<int> g_turn{0};
bool g_swapped = false;  // the main thread's kernel (entered second) runs first
void wait_turn(int turn) {
  while (g_turn.load() != turn) std::this_thread::yield();
}
void* metric_worker(void*) {
  MetricLaunch l{.kernel = "_Z1bv"};
  wait_turn(1);
  l.enter();
  g_turn = 2;
  wait_turn(3);
  if (!g_swapped) l.run({60, 300, 30, 0, 0});
  g_turn = 4;
  if (g_swapped) {
    wait_turn(6);
    l.run({60, 300, 30, 0, 0});
    g_turn = 7;
  }
  wait_turn(5);
  l.exit(kMs);
  return nullptr;
}

void copy(cudaMemcpyKind kind, size_t bytes, uint64_t start = 0, uint64_t end = 0) {
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
  if (start == 0) {
    start = cupti_stub_now();
    end = start + kMs / 2;
  }
  cupti_stub_memcpy(c, copy_kind, bytes, start, end);
}

void spin(double seconds) {
  auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  volatile double x = 0;
  while (std::chrono::steady_clock::now() < end) x = x + 1;
}

std::atomic<int> g_kineto_records{0};
void CUPTIAPI kineto_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 16;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}
void CUPTIAPI kineto_complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) ++g_kineto_records;
  std::free(buffer);
}

// CUDA 13.3's subscriber-scope activity calls, which CUDA 13.0's headers lack (the
// signatures the CUPTI guide gives; the info and config structs are not read).
using RequestV2 = void(CUPTIAPI*)(uint8_t**, size_t*, size_t*, void*);
using CompleteV2 = void(CUPTIAPI*)(uint8_t*, size_t, size_t, void*);
// Weak: the CUDA 12 build (cupti_app12) links a CUPTI that has none of them.
extern "C" __attribute__((weak))
CUptiResult cuptiActivityRegisterCallbacks_v2(CUpti_SubscriberHandle, RequestV2, CompleteV2);
extern "C" __attribute__((weak)) CUptiResult cuptiActivityEnable_v2(CUpti_SubscriberHandle,
                                                                    CUpti_ActivityKind, void*);
extern "C" __attribute__((weak)) CUptiResult cuptiActivityGetNextRecord_v2(CUpti_SubscriberHandle,
                                                                           uint8_t*, size_t,
                                                                           CUpti_Activity**);
CUpti_SubscriberHandle g_v2_subscriber = nullptr;
std::atomic<int> g_v2_records{0};
void CUPTIAPI v2_request(uint8_t** buffer, size_t* size, size_t* max_records, void*) {
  kineto_request(buffer, size, max_records);
}
void CUPTIAPI v2_complete(uint8_t* buffer, size_t, size_t valid, void*) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord_v2(g_v2_subscriber, buffer, valid, &record) == CUPTI_SUCCESS) {
    ++g_v2_records;
  }
  std::free(buffer);
}

std::atomic<int> g_kineto_api{0};
void CUPTIAPI kineto_api(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {
  ++g_kineto_api;
}

// A runtime API call around `body`, as CUDA makes it: the callbacks of what the call does
// (graph resource callbacks) come between its entry and its exit. Returns its correlation id.
template <class Body>
uint32_t runtime_call(uint32_t cbid, const void* params, Body body) {
  uint32_t c = ++g_correlation;
  uint64_t slot = 0;
  cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, c, params, 1, &slot);
  body();
  cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, c, params, 0, &slot);
  return c;
}

// A stream capture of `n` launches (a graph node each), inside regions as `region(i)` names.
struct Captured {
  uintptr_t graph = 0;
  std::vector<uintptr_t> nodes;
  std::vector<const char*> kernels;
};
template <class Region>
Captured capture(int n, const char* const* kernels, Region region) {
  Captured g;
  cudaStreamBeginCapture_v10000_params begin{};
  cudaStreamEndCapture_v10000_params end{};
  runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, &begin,
               [&] { g.graph = cupti_stub_graph_create(); });
  for (int i = 0; i < n; ++i) {
    const char* name = region(i);
    if (name) sonde_region_begin(name);
    cudaLaunchKernel_v7000_params p{};
    runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &p,
                 [&] { g.nodes.push_back(cupti_stub_graph_node_create(g.graph)); });
    g.kernels.push_back(kernels[i]);
    if (name) sonde_region_end(name);
  }
  runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, &end, [] {});
  return g;
}

struct Executable {
  uintptr_t exec = 0;
  std::vector<uintptr_t> copies;
};
Executable instantiate(const Captured& g) {
  Executable e;
  e.copies.resize(g.nodes.size());
  cudaGraphInstantiate_v12000_params p{};
  runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, &p, [&] {
    e.exec =
        cupti_stub_graph_instantiate(g.graph, g.nodes.data(), int(g.nodes.size()), e.copies.data());
  });
  return e;
}

// One cudaGraphLaunch: every kernel of the graph runs, its record carrying the launch's
// correlation id and its node's id (the executable graph's copy).
void replay(const Captured& g, const Executable& e) {
  cudaGraphLaunch_v10000_params gp{};
  uint32_t c = runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, &gp, [] {});
  for (size_t i = 0; i < e.copies.size(); ++i) {
    uint64_t t = cupti_stub_now();
    cupti_stub_graph_kernel(c, g.kernels[i], t, t + kMs, 8, 64, 16, e.copies[i], e.exec);
  }
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
  if (std::strcmp(mode, "kineto_first") == 0) {
    // torch.profiler started before the first CUDA call: its buffers come before sonde starts.
    cuptiActivityRegisterCallbacks(kineto_request, kineto_complete);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  }
  // A program whose CUDA runtime lives in a pip-style tree (the test names it): loaded first,
  // as libtorch_cuda loads nvidia/cuda_runtime/lib/libcudart.so.12.
  if (const char* runtime = std::getenv("CUPTI_APP_RUNTIME")) {
    if (dlopen(runtime, RTLD_NOW | RTLD_LOCAL) == nullptr) std::printf("no runtime\n");
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
  } else if (std::strcmp(mode, "peer") == 0) {
    // cudaMemcpyPeer from GPU 0 to GPU 1: CUPTI reports it as a MEMCPY2 record.
    sonde_region_begin("exchange");
    uint32_t c = ++g_correlation;
    uint64_t slot = 0;
    cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000, c,
                   nullptr, 1, &slot);
    cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000, c,
                   nullptr, 0, &slot);
    uint64_t t = cupti_stub_now();
    cupti_stub_peer_copy(c, 1 << 24, t, t + kMs, 0, 1);
    sonde_region_end("exchange");
  } else if (std::strcmp(mode, "newer_api") == 0) {
    // A runtime call of a CUPTI newer than sonde's table: its id lies past every table.
    uint64_t slot = 0;
    uint32_t c = ++g_correlation;
    for (int site = 1; site >= 0; --site) {
      cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, 4000, c, nullptr, site, &slot);
    }
    launch("_Z4stepv", kMs, 1, 32, 8);
  } else if (std::strcmp(mode, "periodic") == 0) {
    for (int i = 0; i < 8; ++i) {
      sonde_region_begin("step");
      launch("_Z4stepv", kMs, 8, 64, 24);
      sonde_region_end("step");
      usleep(60000);  // with SONDE_FLUSH_INTERVAL=0.1: a flush every other step
    }
  } else if (std::strcmp(mode, "metrics") == 0) {
    const KernelMetrics conv{1000, 50000, 5000, 40, 70}, relu{200, 2000, 1000, 10, 90};
    sonde_region_begin("conv");
    for (int i = 0; i < 2; ++i) metric_launch("_Z4convPf", conv, 3 * kMs);
    sonde_region_end("conv");
    sonde_region_begin("relu");
    for (int i = 0; i < 3; ++i) metric_launch("_Z4reluPf", relu, kMs);
    copy(cudaMemcpyDeviceToHost, 4096);
    sonde_region_end("relu");
    // A launch that fails: no kernel runs, no range comes; the next launch is measured.
    sonde_region_begin("failed");
    MetricLaunch failed{.kernel = "_Z4failv"};
    failed.enter();
    failed.exit(0);
    metric_launch("_Z4convPf", conv, 3 * kMs);
    sonde_region_end("failed");
  } else if (std::strcmp(mode, "metrics_early") == 0) {
    // Under kernel replay the kernel has finished inside its launch: a flush on another
    // thread (here, this one) can take its record before the exit callback has its values.
    sonde_region_begin("early");
    MetricLaunch l{.kernel = "_Z5earlyv"};
    l.enter();
    l.run({40, 400, 4, 0, 0});
    uint64_t t = cupti_stub_now();
    cupti_stub_kernel(l.c, l.kernel, t, t + kMs, 64, 256, 32);
    sonde_flush();
    l.exit(0);  // its record is already out
    sonde_region_end("early");
    sonde_flush();
  } else if (std::strcmp(mode, "metrics_reset") == 0) {
    sonde_region_begin("before");
    metric_launch("_Z6beforev", {1, 10, 1, 0, 0}, kMs);
    sonde_region_end("before");
    cupti_stub_context_destroy(kContext);  // cudaDeviceReset; the next context reuses the handle
    sonde_region_begin("after");
    metric_launch("_Z5afterv", {2, 20, 2, 0, 0}, kMs);
    sonde_region_end("after");
  } else if (std::strcmp(mode, "metrics_nan") == 0) {
    sonde_region_begin("empty");
    metric_launch("_Z5emptyv", {10, 100, 0, std::nan(""), std::nan("")}, kMs);
    sonde_region_end("empty");
  } else if (std::strcmp(mode, "metrics_threads") == 0) {
    pthread_t thread;
    pthread_create(&thread, nullptr, metric_worker, nullptr);
    sonde_region_begin("main_launch");
    MetricLaunch l{.kernel = "_Z1av"};
    l.enter();
    g_turn = 1;
    wait_turn(2);
    g_turn = 3;
    wait_turn(4);
    l.run({10, 100, 1, 0, 0});  // after the worker's kernel: ranges are not in entry order
    l.exit(kMs);
    g_turn = 5;
    sonde_region_end("main_launch");
    pthread_join(thread, nullptr);
  } else if (std::strcmp(mode, "metrics_threads_swapped") == 0) {
    // The launch entered second runs its kernel first, then the first one's runs: both inside
    // the first launch's range window, in the opposite order of their entries.
    g_swapped = true;
    pthread_t thread;
    pthread_create(&thread, nullptr, metric_worker, nullptr);
    sonde_region_begin("main_launch");
    MetricLaunch l{.kernel = "_Z1av"};
    l.enter();
    g_turn = 1;
    wait_turn(2);
    g_turn = 3;
    wait_turn(4);
    l.run({10, 100, 1, 0, 0});
    g_turn = 6;
    wait_turn(7);
    l.exit(kMs);
    g_turn = 5;
    sonde_region_end("main_launch");
    pthread_join(thread, nullptr);
  } else if (std::strcmp(mode, "metrics_capture") == 0) {
    // torch.cuda.graphs / torch.compile: launches between BeginCapture and EndCapture are
    // recorded into a graph, not run; the graph then runs as one launch.
    uint64_t slot = 0;
    cudaStreamBeginCapture_v10000_params begin{};
    cudaStreamEndCapture_v10000_params end{};
    sonde_region_begin("capture");
    uint32_t b = ++g_correlation;
    cupti_stub_api_ex(CUPTI_CB_DOMAIN_RUNTIME_API,
                      CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, b, &begin, 1, &slot,
                      nullptr, kContext);
    cupti_stub_api_ex(CUPTI_CB_DOMAIN_RUNTIME_API,
                      CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, b, &begin, 0, &slot,
                      nullptr, kContext);
    MetricLaunch captured{.kernel = "_Z8capturedv"};
    captured.enter();
    captured.exit(0);  // recorded into the graph: nothing runs
    uint32_t e = ++g_correlation;
    cupti_stub_api_ex(CUPTI_CB_DOMAIN_RUNTIME_API,
                      CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, e, &end, 1, &slot,
                      nullptr, kContext);
    cupti_stub_api_ex(CUPTI_CB_DOMAIN_RUNTIME_API,
                      CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, e, &end, 0, &slot,
                      nullptr, kContext);
    sonde_region_end("capture");
    std::printf("capture_invalidated=%d\n", cupti_stub_capture_invalidated());
    sonde_region_begin("after");
    metric_launch("_Z5afterv", {2, 20, 2, 0, 0}, kMs);
    sonde_region_end("after");
  } else if (std::strcmp(mode, "metrics_waits") == 0) {
    // Kernels that wait for others: replaying one alone would spin for ever.
    sonde_region_begin("waits");
    MetricLaunch nccl{.kernel = "_Z38ncclDevKernel_AllReduce_Sum_f32_RING_LLv"};
    nccl.enter();
    nccl.run({1, 1, 1, 0, 0});
    nccl.exit(kMs);
    MetricLaunch coop{.kernel = "_Z4gridv"};
    coop.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000;
    coop.enter();
    coop.run({1, 1, 1, 0, 0});
    coop.exit(kMs);
    // cudaLaunchKernelEx with the cooperative attribute.
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeCooperative;
    attr.val.cooperative = 1;
    cudaLaunchConfig_t config{};
    config.attrs = &attr;
    config.numAttrs = 1;
    MetricLaunch ex{.kernel = "_Z6gridexv"};
    ex.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060;
    // The launch's parameters are read from the start of `p`, where ExC's config pointer goes.
    cudaLaunchKernelExC_v11060_params ex_params{&config, nullptr, nullptr};
    std::memcpy(&ex.p, &ex_params, std::min(sizeof ex.p, sizeof ex_params));
    ex.enter();
    ex.run({1, 1, 1, 0, 0});
    ex.exit(kMs);
    metric_launch("_Z5plainv", {3, 30, 3, 0, 0}, kMs);
    sonde_region_end("waits");
  } else if (std::strcmp(mode, "nvcc13") == 0) {
    sonde_region_begin("step");
    MetricLaunch l{.kernel = "_Z4stepv",
                   .cbid = CUPTI_RUNTIME_TRACE_CBID___cudaLaunchKernel_v13000};
    l.enter();
    l.exit(kMs);
    sonde_region_end("step");
  } else if (std::strcmp(mode, "context") == 0) {
    constexpr uintptr_t kSecond = 0x2000;
    cupti_stub_context_create(kSecond);
    std::printf("ready_before_launch=%d\n", cupti_stub_profiler_ready(kSecond));
  } else if (std::strcmp(mode, "graph") == 0) {
    // All kernels of one graph launch carry its correlation id; they finish over time, so
    // their records come in different buffers and flushes.
    sonde_region_begin("graph");
    uint32_t c = ++g_correlation;
    uint64_t slot = 0;
    cudaGraphLaunch_v10000_params gp{};
    cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, c,
                   &gp, 1, &slot);
    cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, c,
                   &gp, 0, &slot);
    sonde_region_end("graph");
    const char* kernels[] = {"_Z5node0v", "_Z5node1v", "_Z5node2v", "_Z5node3v"};
    for (int i = 0; i < 4; ++i) {
      uint64_t t = cupti_stub_now();
      cupti_stub_kernel(c, kernels[i], t, t + kMs, 8, 64, 16);
      if (i == 0 || i == 2) {
        usleep(20000);  // the stub's own thread hands back full buffers
        sonde_flush();
      }
    }
  } else if (std::strcmp(mode, "graph_capture") == 0) {
    // torch.cuda.graphs: a forward captured once (one launch in "conv", two in "relu"),
    // instantiated, replayed N times; the replays' records come over two flushes, and the
    // graphs are destroyed before the last one. Then a graph built node by node.
    int n = argc > 2 ? std::atoi(argv[2]) : 5;
    const char* const kernels[] = {"_Z4convv", "_Z4reluv", "_Z4reluv"};
    sonde_region_begin("capture");
    Captured g = capture(3, kernels, [](int i) { return i == 0 ? "conv" : "relu"; });
    Executable e = instantiate(g);
    sonde_region_end("capture");
    sonde_region_begin("replay");
    for (int i = 0; i < n; ++i) {
      replay(g, e);
      if (i == n / 2) sonde_flush();
    }
    sonde_region_end("replay");
    // As PyTorch does after instantiating (keep_graph=False) and at the end.
    cupti_stub_graph_destroy(g.graph, g.nodes.data(), int(g.nodes.size()));
    cupti_stub_graph_exec_destroy(e.exec);
    Captured b;
    sonde_region_begin("build");
    b.graph = cupti_stub_graph_create();
    cudaGraphAddKernelNode_v10000_params ap{};
    runtime_call(CUPTI_RUNTIME_TRACE_CBID_cudaGraphAddKernelNode_v10000, &ap,
                 [&] { b.nodes.push_back(cupti_stub_graph_node_create(b.graph)); });
    b.kernels.push_back("_Z5addedv");
    Executable be = instantiate(b);
    sonde_region_end("build");
    sonde_region_begin("replay_built");
    replay(b, be);
    replay(b, be);
    sonde_region_end("replay_built");
  } else if (std::strcmp(mode, "graph_many") == 0) {
    // More graph nodes than sonde keeps: the first ones keep their origin, the rest are said.
    constexpr int kNodes = (1 << 16) + 10;
    std::vector<const char*> kernels(kNodes, "_Z4manyv");
    sonde_region_begin("capture");
    Captured g = capture(kNodes, kernels.data(), [](int) { return nullptr; });
    Executable e = instantiate(g);
    sonde_region_end("capture");
    sonde_region_begin("replay");
    replay(g, e);
    sonde_region_end("replay");
  } else if (std::strcmp(mode, "kineto") == 0 || std::strcmp(mode, "kineto_subscribes") == 0) {
    sonde_region_begin("before");
    launch("_Z6beforev", kMs, 1, 32, 8);
    sonde_region_end("before");
    // torch.profiler starting: Kineto subscribes for the runtime API (kineto_subscribes: before
    // CUDA 13.2 CUPTI takes one subscriber, and sonde holds it), registers its buffers and
    // enables kernels; stopping, it disables them. Its records must reach it, as without sonde.
    CUpti_SubscriberHandle subscriber = nullptr;
    int subscribed = -1;  // not asked
    if (std::strcmp(mode, "kineto_subscribes") == 0) {
      subscribed = cuptiSubscribe(&subscriber, kineto_api, nullptr);
      cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    }
    CUptiResult registered = cuptiActivityRegisterCallbacks(kineto_request, kineto_complete);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    sonde_region_begin("profiled");
    launch("_Z6insidev", kMs, 1, 32, 8);
    sonde_region_end("profiled");
    cuptiActivityFlushAll(0);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    if (subscribed == CUPTI_SUCCESS) cuptiUnsubscribe(subscriber);
    std::printf("kineto subscribe=%d register=%d api=%d records=%d\n", subscribed, int(registered),
                g_kineto_api.load(), g_kineto_records.load());
  } else if (std::strcmp(mode, "kineto_leaves") == 0 ||
             std::strcmp(mode, "kineto_finalizes") == 0) {
    // A scheduled torch.profiler window in the middle of a run: before it and after it the
    // program's kernels are sonde's, during it Kineto's.
    sonde_region_begin("before");
    launch("_Z6beforev", kMs, 1, 32, 8);
    launch("_Z6beforev", kMs, 1, 32, 8);
    sonde_region_end("before");
    sonde_flush();
    CUpti_SubscriberHandle subscriber = nullptr;
    CUptiResult subscribed = cuptiSubscribe(&subscriber, kineto_api, nullptr);
    cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    CUptiResult registered = cuptiActivityRegisterCallbacks(kineto_request, kineto_complete);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    sonde_region_begin("profiled");
    for (int i = 0; i < 3; ++i) launch("_Z6insidev", kMs, 1, 32, 8);
    sonde_region_end("profiled");
    sonde_flush();  // sonde's flusher runs during the window
    // Kineto stopping: disable its kinds, flush its records to it, then let CUPTI go.
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityFlushAll(0);
    CUptiResult left =
        std::strcmp(mode, "kineto_leaves") == 0 ? cuptiUnsubscribe(subscriber) : cuptiFinalize();
    int records = g_kineto_records.load();
    // sonde takes CUPTI back on a thread of its own: the program waits for it (2 s at most).
    for (int i = 0; i < 200 && (traced == nullptr || !traced()); ++i) usleep(10000);
    sonde_region_begin("after");
    for (int i = 0; i < 4; ++i) launch("_Z5afterv", kMs, 1, 32, 8);
    sonde_region_end("after");
    std::printf("kineto subscribe=%d register=%d left=%d api=%d records=%d later=%d\n",
                int(subscribed), int(registered), int(left), g_kineto_api.load(), records,
                g_kineto_records.load() - records);
  } else if (std::strcmp(mode, "v2_client") == 0) {
    // A second tracer joins for a window, through the subscriber-scope calls and allowing
    // others (CUpti_SubscriberParams' allowMultipleSubscribers, after oldSubscriberSize).
    sonde_region_begin("before");
    launch("_Z6beforev", kMs, 1, 32, 8);
    sonde_region_end("before");
    struct {
      CUpti_SubscriberParams base;
      uint8_t allow;
    } params{};
    params.base.structSize = offsetof(decltype(params), allow) + 1;
    params.base.subscriberName = "second tool";
    params.allow = 1;
    CUptiResult subscribed = cuptiSubscribe_v2(&g_v2_subscriber, kineto_api, nullptr, &params.base);
    cuptiEnableDomain(1, g_v2_subscriber, CUPTI_CB_DOMAIN_RUNTIME_API);
    CUptiResult registered =
        cuptiActivityRegisterCallbacks_v2(g_v2_subscriber, v2_request, v2_complete);
    CUptiResult enabled =
        cuptiActivityEnable_v2(g_v2_subscriber, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, nullptr);
    sonde_region_begin("profiled");
    for (int i = 0; i < 3; ++i) launch("_Z6insidev", kMs, 1, 32, 8);
    sonde_region_end("profiled");
    sonde_flush();
    cuptiActivityFlushAll(0);
    int records = g_v2_records.load();
    CUptiResult left = cuptiUnsubscribe(g_v2_subscriber);
    sonde_region_begin("after");
    for (int i = 0; i < 2; ++i) launch("_Z5afterv", kMs, 1, 32, 8);
    sonde_region_end("after");
    std::printf("v2 subscribe=%d register=%d enable=%d left=%d api=%d records=%d\n",
                int(subscribed), int(registered), int(enabled), int(left), g_kineto_api.load(),
                records);
  } else if (std::strcmp(mode, "kineto_first") == 0) {
    sonde_region_begin("profiled");
    launch("_Z6insidev", kMs, 1, 32, 8);
    sonde_region_end("profiled");
    cuptiActivityFlushAll(0);
    std::printf("kineto records=%d\n", g_kineto_records.load());
  } else if (std::strcmp(mode, "disable") == 0) {
    // A library that turns kernel records off for everyone, without buffers of its own.
    launch("_Z6beforev", kMs, 1, 32, 8);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    launch("_Z5afterv", kMs, 1, 32, 8);
  } else if (std::strcmp(mode, "teardown") == 0) {
    sonde_region_begin("step");
    launch("_Z4stepv", kMs, 8, 64, 24);
    launch("_Z4stepv", kMs, 8, 64, 24);
    sonde_region_end("step");
    // libcudart registers its exit handler at its first call, after sonde's: it runs first,
    // and destroys the context while sonde's records are still in CUPTI's buffers.
    std::atexit([] { cupti_stub_context_destroy(kContext); });
  } else if (std::strcmp(mode, "breakdown") == 0) {
    // Each step's device work, in ms from the step's start: the batch's host-to-device copy
    // [0, 1], forward [1, 4], backward [4, 9] and [8, 10] (two streams), NCCL kernels launched
    // from backward (as DDP's gradient hooks do) [7, 11] and [10.5, 11.5], update [11, 12].
    // The host launches it all at once and then waits for the device, as loss.item() does.
    for (int step = 0; step < 4; ++step) {
      sonde_region_begin("step");
      uint64_t t = cupti_stub_now() + kMs;
      auto at = [t](double ms) { return t + uint64_t(ms * double(kMs)); };
      copy(cudaMemcpyHostToDevice, 1 << 20, at(0), at(1));
      sonde_region_begin("forward");
      launch_at("_Z8fwd_gemmv", at(1), at(4));
      sonde_region_end("forward");
      sonde_region_begin("backward");
      launch_at("_Z8bwd_gemmv", at(4), at(9));
      launch_at("_Z8bwd_reluv", at(8), at(10));
      launch_at("_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LLv", at(7), at(11));
      launch_at("_Z39ncclDevKernel_Broadcast_RING_LL_Sum_f32v", at(10.5), at(11.5));
      sonde_region_end("backward");
      sonde_region_begin("update");
      launch_at("_Z10sgd_updatev", at(11), at(12));
      sonde_region_end("update");
      while (cupti_stub_now() < at(13)) usleep(200);
      sonde_region_end("step");
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
