// A CUPTI client as PyTorch ships Kineto: a shared library linked against libcupti that the
// program opens with RTLD_LOCAL, so libcupti is in that library's scope and not the global one
// (cupti_local_client opens it). kineto_like_start does what Kineto does when torch.profiler
// starts: subscribe, register activity buffers, enable kernel records; then a launch it sees
// through its callback and whose kernel record reaches its buffers.
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "cupti_stub_control.h"

namespace {
std::atomic<int> g_api{0}, g_records{0};
void CUPTIAPI on_api(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) { ++g_api; }
void CUPTIAPI on_request(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = 1 << 16;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}
void CUPTIAPI on_complete(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) ++g_records;
  std::free(buffer);
}
}  // namespace

extern "C" __attribute__((visibility("default"))) void kineto_like_start(char* out, size_t size) {
  CUpti_SubscriberHandle subscriber = nullptr;
  CUptiResult subscribed = cuptiSubscribe(&subscriber, on_api, nullptr);
  CUptiResult registered = cuptiActivityRegisterCallbacks(on_request, on_complete);
  CUptiResult enabled = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  uint64_t slot = 0;
  cudaLaunchKernel_v7000_params p{};
  cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 900,
                 &p, 1, &slot);
  cupti_stub_api(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 900,
                 &p, 0, &slot);
  uint64_t t = cupti_stub_now();
  cupti_stub_kernel(900, "_Z7profiledv", t, t + 1000000, 1, 32, 8);
  cuptiActivityFlushAll(0);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (subscribed == CUPTI_SUCCESS) cuptiUnsubscribe(subscriber);
  std::snprintf(out, size, "subscribe=%d register=%d enable=%d api=%d records=%d", int(subscribed),
                int(registered), int(enabled), g_api.load(), g_records.load());
}
