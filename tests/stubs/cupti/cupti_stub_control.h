// What the stub libcupti (cupti_stub.cpp, cupti_stub_profiler.cpp) exports for test programs:
// each call says that the program made an API call or that the GPU ran something, and the stub
// turns it into CUPTI's callbacks and activity records.
#pragma once

#include <stdint.h>

extern "C" {
int cupti_stub_api(int domain, uint32_t cbid, uint32_t correlation, const void* params, int enter,
                   uint64_t* slot);
uint64_t cupti_stub_now(void);
void cupti_stub_kernel(uint32_t correlation, const char* name, uint64_t start, uint64_t end,
                       int grid_x, int block_x, int registers);
void cupti_stub_memcpy(uint32_t correlation, int copy_kind, uint64_t bytes, uint64_t start,
                       uint64_t end);
void cupti_stub_memset(uint32_t correlation, uint64_t bytes, uint64_t start, uint64_t end);
void cupti_stub_peer_copy(uint32_t correlation, uint64_t bytes, uint64_t start, uint64_t end,
                          uint32_t src_device, uint32_t dst_device);
int cupti_stub_api_ex(int domain, uint32_t cbid, uint32_t correlation, const void* params,
                      int enter, uint64_t* slot, const char* symbol, uintptr_t context);
int cupti_stub_kernel_run(uintptr_t context, const char* name, const char* const* metric_names,
                          const double* values, int n);
void cupti_stub_context_destroy(uintptr_t context);
void cupti_stub_context_create(uintptr_t context);
int cupti_stub_profiler_ready(uintptr_t context);
int cupti_stub_capture_invalidated(void);
// CUDA graphs (cupti_stub_graphs.cpp): handles the stub makes, each with CUPTI's resource
// callbacks; call them inside the API call that does it, as CUDA does.
uintptr_t cupti_stub_graph_create(void);
uintptr_t cupti_stub_graph_node_create(uintptr_t graph);
uintptr_t cupti_stub_graph_instantiate(uintptr_t graph, const uintptr_t* nodes, int n,
                                       uintptr_t* copies);
void cupti_stub_graph_destroy(uintptr_t graph, const uintptr_t* nodes, int n);
void cupti_stub_graph_exec_destroy(uintptr_t exec);
void cupti_stub_graph_kernel(uint32_t correlation, const char* name, uint64_t start, uint64_t end,
                             int grid_x, int block_x, int registers, uintptr_t node,
                             uintptr_t exec);
}
