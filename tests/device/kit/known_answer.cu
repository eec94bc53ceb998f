// The device kit's known-answer CUDA program (tests/device/check.sh). Every count is fixed by
// the arguments, so the profile's counts can be asserted exactly:
//
//   thread 1, stream 1: region "warm": 1 launch of kernel_w (fills the stream so that the timed
//                       launches queue behind it); region "f": N launches of kernel_a, each
//                       between two events
//   thread 2, stream 2: region "g": M cublasSgemm calls
//   main, stream 1:     region "capture": K launches of kernel_b captured into a graph;
//                       region "replay": R launches of that graph
//
// It prints one JSON line: the arguments and each kernel_a launch's cudaEventElapsedTime.
// One source for both builds: nvcc on a GPU machine, and a C++ compiler against the stub
// libraries (tests/stubs/gpu) for the rehearsal, where a kernel is a host function whose symbol
// names it and the stub runtime's "GPU" gives it 5 us per block.
#ifdef __CUDACC__
#include <cuda_runtime.h>
#else
#include <cuda_runtime_api.h>
#undef __global__
#define __global__
#endif
#include <cublas_v2.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

// sonde's regions, when libsonde is preloaded; a plain run has none (weak, so no link to it).
extern "C" {
void sonde_region_begin(const char*) __attribute__((weak));
void sonde_region_end(const char*) __attribute__((weak));
}
static void begin(const char* name) {
  if (sonde_region_begin) sonde_region_begin(name);
}
static void end(const char* name) {
  if (sonde_region_end) sonde_region_end(name);
}

#define CHECK(call)                                                                  \
  do {                                                                               \
    cudaError_t e_ = (call);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(2);                                                                  \
    }                                                                                \
  } while (0)
#define CHECK_BLAS(call)                                                             \
  do {                                                                               \
    if ((call) != CUBLAS_STATUS_SUCCESS) {                                           \
      std::fprintf(stderr, "%s:%d %s failed\n", __FILE__, __LINE__, #call);          \
      std::exit(2);                                                                  \
    }                                                                                \
  } while (0)

// Each block spins `cycles` clock cycles, then counts its run in out[block].
__global__ void kernel_a(float* out, long long cycles) {
#ifdef __CUDACC__
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0) out[blockIdx.x] += 1.0f;
#endif
}
__global__ void kernel_w(float* out, long long cycles) {
#ifdef __CUDACC__
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = 1.0f;
#endif
}
__global__ void kernel_b(float* out, int n) {
#ifdef __CUDACC__
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = out[i] * 0.5f + 1.0f;
#endif
}

namespace {

// Launch configurations (grid, block): kernel_a's 64 blocks run at once on a GPU (about 100 us
// at 200k cycles) and 320 us on the stub; kernel_w's 8192 blocks queue about 0.5 ms of GPU work
// (41 ms on the stub) ahead of them.
constexpr unsigned kBlocksA = 64, kBlocksW = 8192, kBlocksB = 16, kThreads = 32;
constexpr long long kCyclesA = 200000, kCyclesW = 200000;

template <class... Args>
void launch(void (*kernel)(Args...), unsigned blocks, cudaStream_t s, Args... args) {
  void* params[] = {&args...};
  CHECK(cudaLaunchKernel((const void*)kernel, dim3(blocks), dim3(kThreads), params, 0, s));
}

void timed_launches(int n, cudaStream_t s, float* a_out, float* w_out, std::vector<float>* ms) {
  std::vector<cudaEvent_t> before(n), after(n);
  for (int i = 0; i < n; ++i) {
    CHECK(cudaEventCreate(&before[i]));
    CHECK(cudaEventCreate(&after[i]));
  }
  begin("warm");
  launch(kernel_w, kBlocksW, s, w_out, kCyclesW);
  end("warm");
  begin("f");
  for (int i = 0; i < n; ++i) {
    CHECK(cudaEventRecord(before[i], s));
    launch(kernel_a, kBlocksA, s, a_out, kCyclesA);
    CHECK(cudaEventRecord(after[i], s));
  }
  end("f");
  CHECK(cudaStreamSynchronize(s));
  for (int i = 0; i < n; ++i) {
    CHECK(cudaEventElapsedTime(&(*ms)[i], before[i], after[i]));
    CHECK(cudaEventDestroy(before[i]));
    CHECK(cudaEventDestroy(after[i]));
  }
}

void gemms(int m, cudaStream_t s, int dim) {
  cublasHandle_t h;
  CHECK_BLAS(cublasCreate(&h));
  CHECK_BLAS(cublasSetStream(h, s));
  float *a, *b, *c;
  size_t bytes = sizeof(float) * dim * dim;
  CHECK(cudaMalloc((void**)&a, bytes));
  CHECK(cudaMalloc((void**)&b, bytes));
  CHECK(cudaMalloc((void**)&c, bytes));
  CHECK(cudaMemsetAsync(a, 0, bytes, s));
  CHECK(cudaMemsetAsync(b, 0, bytes, s));
  const float alpha = 1.0f, beta = 0.0f;
  begin("g");
  for (int i = 0; i < m; ++i) {
    CHECK_BLAS(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &alpha, a, dim, b, dim,
                           &beta, c, dim));
  }
  end("g");
  CHECK(cudaStreamSynchronize(s));
  CHECK_BLAS(cublasDestroy(h));
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  CHECK(cudaFree(c));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s N M K R\n", argv[0]);
    return 1;
  }
  int n = std::atoi(argv[1]), m = std::atoi(argv[2]), k = std::atoi(argv[3]), r = std::atoi(argv[4]);
  int devices = 0;
  CHECK(cudaGetDeviceCount(&devices));  // opens the driver, as any CUDA program's first call
  if (devices < 1) return 2;
  cudaStream_t s1, s2;
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
  float *a_out, *w_out, *b_out;
  CHECK(cudaMalloc((void**)&a_out, sizeof(float) * kBlocksA));
  CHECK(cudaMalloc((void**)&w_out, sizeof(float)));
  CHECK(cudaMalloc((void**)&b_out, sizeof(float) * kBlocksB * kThreads));
  CHECK(cudaMemset(a_out, 0, sizeof(float) * kBlocksA));
  CHECK(cudaMemset(b_out, 0, sizeof(float) * kBlocksB * kThreads));
  CHECK(cudaDeviceSynchronize());

  std::vector<float> ms(n);
  std::thread one(timed_launches, n, s1, a_out, w_out, &ms);
  std::thread two(gemms, m, s2, 256);
  one.join();
  two.join();

  begin("capture");
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < k; ++i) launch(kernel_b, kBlocksB, s1, b_out, int(kBlocksB * kThreads));
  CHECK(cudaStreamEndCapture(s1, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  end("capture");
  begin("replay");
  for (int i = 0; i < r; ++i) CHECK(cudaGraphLaunch(exec, s1));
  end("replay");
  CHECK(cudaStreamSynchronize(s1));
  CHECK(cudaGetLastError());

  // On a GPU the kernels' own counts say every launch ran.
  int ran = -1;
#ifdef __CUDACC__
  std::vector<float> counts(kBlocksA);
  CHECK(cudaMemcpy(counts.data(), a_out, sizeof(float) * kBlocksA, cudaMemcpyDeviceToHost));
  ran = 1;
  for (float c : counts) ran &= c == float(n);
#endif
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  std::printf("{\"n\": %d, \"m\": %d, \"k\": %d, \"r\": %d, \"counts_ok\": %d, \"event_ms\": [", n,
              m, k, r, ran);
  for (int i = 0; i < n; ++i) std::printf("%s%.6f", i ? ", " : "", ms[i]);
  std::printf("]}\n");
  return 0;
}
