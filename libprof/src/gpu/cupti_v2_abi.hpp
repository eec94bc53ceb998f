// CUPTI's subscriber-scope activity API (CUDA 13.2 on; several subscribers tracing at once from
// 13.3 with an r610 driver), declared here because sonde builds against CUDA 13.0's headers,
// which lack it. The signatures are those the CUPTI documentation gives
// (cuptiActivityRegisterCallbacks_v2, cuptiActivityEnable_v2, cuptiActivityDisable_v2,
// cuptiActivityGetNextRecord_v2). sonde reads none of the info or config structs: it asks for
// the predefined records (config nullptr) and ignores the per-buffer info, so they stay opaque.
#pragma once

#include <cupti.h>

#include <cstddef>
#include <cstdint>

namespace sonde {

struct CuptiBufferRequestInfo;   // CUpti_BufferCallbackRequestInfo
struct CuptiBufferCompleteInfo;  // CUpti_BufferCallbackCompleteInfo
struct CuptiActivityConfig;      // CUpti_ActivityConfig

using CuptiBufferRequestV2 = void(CUPTIAPI*)(uint8_t** buffer, size_t* size, size_t* max_records,
                                             CuptiBufferRequestInfo* info);
using CuptiBufferCompleteV2 = void(CUPTIAPI*)(uint8_t* buffer, size_t size, size_t valid,
                                              CuptiBufferCompleteInfo* info);

using CuptiActivityRegisterCallbacksV2 = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle,
                                                                CuptiBufferRequestV2,
                                                                CuptiBufferCompleteV2);
using CuptiActivityEnableV2 = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, CUpti_ActivityKind,
                                                     CuptiActivityConfig*);
using CuptiActivityGetNextRecordV2 = CUptiResult(CUPTIAPI*)(CUpti_SubscriberHandle, uint8_t*,
                                                            size_t, CUpti_Activity**);

// The first release whose activity records each subscriber gets on its own (the CUPTI guide,
// "Multiple Subscribers": CUDA 13.3 and a driver of r610 or later). 13.2 has the _v2 calls for
// user-defined records, with one activity client.
constexpr uint32_t kPerSubscriberActivityVersion = 130300;

}  // namespace sonde
