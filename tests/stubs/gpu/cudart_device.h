/* The stub runtime's "GPU" (cudart_device.c), as the launch and synchronisation entry points of
 * cudart_stub.c use it. */
#pragma once
#include <cuda_runtime_api.h>
#include <stdint.h>

/* CUPTI's callback ids name the entry point a launch came through. */
#include <cupti_runtime_cbid.h>

/* A kernel launch, reported to CUPTI under `cbid` (the entry point the program called). */
cudaError_t stub_device_launch(uint32_t cbid, const void* f, dim3 grid, dim3 block, void** args,
                               size_t shared, cudaStream_t stream);
cudaError_t stub_device_stream_wait(cudaStream_t stream);
cudaError_t stub_device_event_wait(cudaEvent_t event);
cudaError_t stub_device_wait_all(void);
