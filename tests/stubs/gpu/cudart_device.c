/* The stub runtime's "GPU": streams, events, stream capture and graphs, and, when asked, the
 * CUPTI reports the real runtime makes (tests/device/check.sh --rehearse runs its known-answer
 * program on it).
 *
 * Time: a kernel runs 5 us per block, one kernel after another on its stream, from the later of
 * its launch and the end of the stream's previous work; an event takes the time its stream
 * reaches it. Synchronisations sleep until the work they wait for is done, so device time passes
 * in real time. Times are on the stub libcupti's clock (CLOCK_REALTIME + 1 h).
 *
 * CUDART_STUB_DEVICE=1: as the real runtime does for a CUPTI subscriber, each launch, graph
 * launch and capture begin/end is reported to the stub libcupti (tests/stubs/cupti) when it is
 * loaded, with a correlation id, and each kernel that runs gets its activity record (a graph's
 * kernels carry the graph launch's id and their graph node's). Graphs and their nodes are made
 * through the stub libcupti too, inside the call that makes them, so that its graph resource
 * callbacks come as CUDA's do: a graph at cudaStreamBeginCapture, a node at each captured
 * launch, a copy of each node at cudaGraphInstantiate (reported as an API call), and their
 * destruction at cudaGraphDestroy / cudaGraphExecDestroy. Off by default: the wrapper tests
 * (test_gpu_wrappers.py) expect the runtime to report nothing. */
#define _GNU_SOURCE
#include "cudart_device.h"

#include <cuda_runtime_api.h>
#include <cupti_callbacks.h>
#include <dlfcn.h>
#include <generated_cuda_runtime_api_meta.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kBlockNs = 5000, kMaxNodes = 64 };
static const uint64_t kClockShift = 3600ull * 1000000000ull; /* the stub libcupti's */
static const uintptr_t kContext = 0x1000;                    /* the stub libcupti's default */

struct Node {
  const void* func;
  unsigned blocks, threads;
  uintptr_t cupti; /* the stub libcupti's handle of the node, 0: none */
};
struct CUgraph_st {
  int n;
  struct Node nodes[kMaxNodes];
  uintptr_t cupti;
};
struct CUgraphExec_st {
  struct CUgraph_st graph; /* its nodes' handles are the copies' */
  uintptr_t cupti;
};
struct CUstream_st {
  uint64_t ready;             /* when its last work ends */
  struct CUgraph_st* capture; /* the graph being captured into, or none */
};
struct CUevent_st {
  uint64_t at;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st g_default_stream;
static uint32_t g_correlation = 5000;
static uint64_t g_latest; /* the end of the latest work on any stream */

static uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + kClockShift;
}

static void sleep_until(uint64_t t) {
  uint64_t n = now();
  if (t <= n) return;
  struct timespec d = {(time_t)((t - n) / 1000000000ull), (long)((t - n) % 1000000000ull)};
  nanosleep(&d, NULL);
}

static struct CUstream_st* stream_of(cudaStream_t s) { return s ? s : &g_default_stream; }

/* ---- reports to the stub libcupti ---- */

typedef int (*ApiFn)(int, uint32_t, uint32_t, const void*, int, uint64_t*, const char*, uintptr_t);
typedef void (*KernelFn)(uint32_t, const char*, uint64_t, uint64_t, int, int, int);
static ApiFn g_api;
static KernelFn g_kernel;
typedef uintptr_t (*GraphCreateFn)(void);
typedef uintptr_t (*NodeCreateFn)(uintptr_t);
typedef uintptr_t (*InstantiateFn)(uintptr_t, const uintptr_t*, int, uintptr_t*);
typedef void (*GraphDestroyFn)(uintptr_t, const uintptr_t*, int);
typedef void (*ExecDestroyFn)(uintptr_t);
typedef void (*GraphKernelFn)(uint32_t, const char*, uint64_t, uint64_t, int, int, int, uintptr_t,
                              uintptr_t);
static GraphCreateFn g_graph_create;
static NodeCreateFn g_node_create;
static InstantiateFn g_instantiate;
static GraphDestroyFn g_graph_destroy;
static ExecDestroyFn g_exec_destroy;
static GraphKernelFn g_graph_kernel;

/* The stub libcupti once sonde has loaded it (by path or by name: its soname matches). */
static int cupti(void) {
  static int wanted = -1;
  if (wanted < 0) {
    const char* v = getenv("CUDART_STUB_DEVICE");
    wanted = v != NULL && strcmp(v, "1") == 0;
  }
  if (!wanted) return 0;
  if (g_api == NULL) {
    void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) return 0;
    g_kernel = (KernelFn)dlsym(h, "cupti_stub_kernel");
    g_graph_create = (GraphCreateFn)dlsym(h, "cupti_stub_graph_create");
    g_node_create = (NodeCreateFn)dlsym(h, "cupti_stub_graph_node_create");
    g_instantiate = (InstantiateFn)dlsym(h, "cupti_stub_graph_instantiate");
    g_graph_destroy = (GraphDestroyFn)dlsym(h, "cupti_stub_graph_destroy");
    g_exec_destroy = (ExecDestroyFn)dlsym(h, "cupti_stub_graph_exec_destroy");
    g_graph_kernel = (GraphKernelFn)dlsym(h, "cupti_stub_graph_kernel");
    g_api = (ApiFn)dlsym(h, "cupti_stub_api_ex");
  }
  return g_api != NULL && g_kernel != NULL && g_graph_create != NULL && g_node_create != NULL &&
         g_instantiate != NULL && g_graph_destroy != NULL && g_exec_destroy != NULL &&
         g_graph_kernel != NULL;
}

static uint32_t next_correlation(void) {
  return __atomic_add_fetch(&g_correlation, 1, __ATOMIC_SEQ_CST);
}

static void report(uint32_t cbid, uint32_t correlation, const void* params, int enter,
                   uint64_t* slot, const char* symbol) {
  if (cupti()) {
    g_api(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, correlation, params, enter, slot, symbol, kContext);
  }
}

/* The kernel's symbol (mangled, as CUPTI names it): the host function's dynamic symbol. */
static const char* kernel_name(const void* f) {
  Dl_info info;
  if (f != NULL && dladdr(f, &info) != 0 && info.dli_sname != NULL) return info.dli_sname;
  return "stub_kernel";
}

/* Runs a kernel on `s` (mutex held); returns its start and end. */
static void run(struct CUstream_st* s, unsigned blocks, uint64_t* start, uint64_t* end) {
  uint64_t t = now();
  *start = s->ready > t ? s->ready : t;
  *end = *start + (uint64_t)blocks * kBlockNs;
  s->ready = *end;
  if (*end > g_latest) g_latest = *end;
}

cudaError_t stub_device_launch(uint32_t cbid, const void* f, dim3 grid, dim3 block, void** args,
                               size_t shared, cudaStream_t stream) {
  uint32_t c = next_correlation();
  uint64_t slot = 0, start = 0, end = 0;
  cudaLaunchKernel_v7000_params p = {f, grid, block, args, shared, stream};
  const char* name = kernel_name(f);
  unsigned blocks = grid.x * grid.y * grid.z, threads = block.x * block.y * block.z;
  report(cbid, c, &p, 1, &slot, name);
  pthread_mutex_lock(&g_mu);
  struct CUstream_st* s = stream_of(stream);
  int captured = s->capture != NULL;
  struct Node* node = NULL;
  uintptr_t graph = 0;
  if (captured && s->capture->n < kMaxNodes) {
    node = &s->capture->nodes[s->capture->n++];
    *node = (struct Node){f, blocks, threads, 0};
    graph = s->capture->cupti;
  } else if (!captured) {
    run(s, blocks, &start, &end);
  }
  pthread_mutex_unlock(&g_mu);
  /* The captured launch makes a graph node, inside the launch call. */
  if (node != NULL && graph != 0 && cupti()) node->cupti = g_node_create(graph);
  report(cbid, c, &p, 0, &slot, name);
  if (!captured && cupti()) g_kernel(c, name, start, end, (int)blocks, (int)threads, 32);
  return cudaSuccess;
}

/* ---- streams and events ---- */

cudaError_t cudaStreamCreate(cudaStream_t* s) {
  *s = calloc(1, sizeof(struct CUstream_st));
  return *s ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  return cudaStreamCreate(s);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  free(s);
  return cudaSuccess;
}
cudaError_t stub_device_stream_wait(cudaStream_t stream) {
  pthread_mutex_lock(&g_mu);
  uint64_t ready = stream_of(stream)->ready;
  pthread_mutex_unlock(&g_mu);
  sleep_until(ready);
  return cudaSuccess;
}
cudaError_t stub_device_wait_all(void) {
  pthread_mutex_lock(&g_mu);
  uint64_t ready = g_latest;
  pthread_mutex_unlock(&g_mu);
  sleep_until(ready);
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = calloc(1, sizeof(struct CUevent_st));
  return *e ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) { return cudaEventCreate(e); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  free(e);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  if (e == NULL) return cudaErrorInvalidResourceHandle;
  pthread_mutex_lock(&g_mu);
  struct CUstream_st* s = stream_of(stream);
  uint64_t t = now();
  e->at = s->ready > t ? s->ready : t;
  pthread_mutex_unlock(&g_mu);
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (start == NULL || end == NULL) return cudaErrorInvalidResourceHandle;
  *ms = (float)((double)((int64_t)(end->at - start->at)) / 1e6);
  return cudaSuccess;
}
cudaError_t stub_device_event_wait(cudaEvent_t e) {
  if (e == NULL) return cudaSuccess; /* gpu_calls waits on no event: nothing to wait for */
  sleep_until(e->at);
  return cudaSuccess;
}

/* ---- capture and graphs ---- */

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  uint32_t c = next_correlation();
  uint64_t slot = 0;
  cudaStreamBeginCapture_v10000_params p = {stream, mode};
  report(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, c, &p, 1, &slot, NULL);
  struct CUgraph_st* g = calloc(1, sizeof(struct CUgraph_st));
  if (g != NULL && cupti()) g->cupti = g_graph_create();
  pthread_mutex_lock(&g_mu);
  stream_of(stream)->capture = g;
  pthread_mutex_unlock(&g_mu);
  report(CUPTI_RUNTIME_TRACE_CBID_cudaStreamBeginCapture_v10000, c, &p, 0, &slot, NULL);
  return g ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  uint32_t c = next_correlation();
  uint64_t slot = 0;
  cudaStreamEndCapture_v10000_params p = {stream, graph};
  report(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, c, &p, 1, &slot, NULL);
  pthread_mutex_lock(&g_mu);
  *graph = stream_of(stream)->capture;
  stream_of(stream)->capture = NULL;
  pthread_mutex_unlock(&g_mu);
  report(CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000, c, &p, 0, &slot, NULL);
  return *graph ? cudaSuccess : cudaErrorStreamCaptureInvalidated;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  uint32_t c = next_correlation();
  uint64_t slot = 0;
  cudaGraphInstantiate_v12000_params p = {exec, graph, flags};
  report(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, c, &p, 1, &slot, NULL);
  *exec = calloc(1, sizeof(struct CUgraphExec_st));
  if (*exec != NULL) {
    (*exec)->graph = *graph;
    if (graph->cupti != 0 && cupti()) {
      uintptr_t nodes[kMaxNodes], copies[kMaxNodes];
      for (int i = 0; i < graph->n; ++i) nodes[i] = graph->nodes[i].cupti;
      (*exec)->cupti = g_instantiate(graph->cupti, nodes, graph->n, copies);
      for (int i = 0; i < graph->n; ++i) (*exec)->graph.nodes[i].cupti = copies[i];
    }
  }
  report(CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000, c, &p, 0, &slot, NULL);
  return *exec ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  uint32_t c = next_correlation();
  uint64_t slot = 0, start[kMaxNodes], end[kMaxNodes];
  cudaGraphLaunch_v10000_params p = {exec, stream};
  report(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, c, &p, 1, &slot, NULL);
  pthread_mutex_lock(&g_mu);
  struct CUstream_st* s = stream_of(stream);
  for (int i = 0; i < exec->graph.n; ++i) run(s, exec->graph.nodes[i].blocks, &start[i], &end[i]);
  pthread_mutex_unlock(&g_mu);
  report(CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, c, &p, 0, &slot, NULL);
  for (int i = 0; i < exec->graph.n && cupti(); ++i) {
    const struct Node* n = &exec->graph.nodes[i];
    g_graph_kernel(c, kernel_name(n->func), start[i], end[i], (int)n->blocks, (int)n->threads, 32,
                   n->cupti, exec->cupti);
  }
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  if (exec != NULL && exec->cupti != 0 && cupti()) g_exec_destroy(exec->cupti);
  free(exec);
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (graph != NULL && graph->cupti != 0 && cupti()) {
    uintptr_t nodes[kMaxNodes];
    for (int i = 0; i < graph->n; ++i) nodes[i] = graph->nodes[i].cupti;
    g_graph_destroy(graph->cupti, nodes, graph->n);
  }
  free(graph);
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return cudaSuccess; }
