// libcupti, opened at run time: libsonde links against neither libcupti nor libcuda, so a
// program without CUDA never loads them. Every entry point sonde calls is resolved here, once.
#pragma once

#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <string>

#include "gpu/cupti_v2_abi.hpp"

namespace sonde {

// clang-format off (one function a line; clang-format 14 reflows X-lists differently each run)
#define SONDE_CUPTI_FUNCTIONS(X)       \
  X(cuptiGetVersion)                   \
  X(cuptiGetResultString)              \
  X(cuptiSubscribe)                    \
  X(cuptiUnsubscribe)                  \
  X(cuptiEnableDomain)                 \
  X(cuptiGetCallbackName)              \
  X(cuptiActivityEnable)               \
  X(cuptiActivityDisable)              \
  X(cuptiActivityRegisterCallbacks)    \
  X(cuptiActivityFlushAll)             \
  X(cuptiActivityGetNextRecord)        \
  X(cuptiActivityGetNumDroppedRecords) \
  X(cuptiGetTimestamp)
// clang-format on

// The range profiler and its host side, used only for SONDE_GPU_METRICS.
// clang-format off (one function a line; clang-format 14 reflows X-lists differently each run)
#define SONDE_CUPTI_PROFILER_FUNCTIONS(X)         \
  X(cuptiGetDeviceId)                             \
  X(cuptiDeviceGetChipName)                       \
  X(cuptiProfilerInitialize)                      \
  X(cuptiProfilerGetCounterAvailability)          \
  X(cuptiProfilerHostInitialize)                  \
  X(cuptiProfilerHostGetMetricProperties)         \
  X(cuptiProfilerHostConfigAddMetrics)            \
  X(cuptiProfilerHostGetConfigImageSize)          \
  X(cuptiProfilerHostGetConfigImage)              \
  X(cuptiProfilerHostGetNumOfPasses)              \
  X(cuptiProfilerHostEvaluateToGpuValues)         \
  X(cuptiRangeProfilerEnable)                     \
  X(cuptiRangeProfilerDisable)                    \
  X(cuptiRangeProfilerSetConfig)                  \
  X(cuptiRangeProfilerStart)                      \
  X(cuptiRangeProfilerStop)                       \
  X(cuptiRangeProfilerDecodeData)                 \
  X(cuptiRangeProfilerGetCounterDataSize)         \
  X(cuptiRangeProfilerCounterDataImageInitialize) \
  X(cuptiRangeProfilerGetCounterDataInfo)         \
  X(cuptiRangeProfilerCounterDataGetRangeInfo)
// clang-format on

struct CuptiLibrary {
#define SONDE_CUPTI_POINTER(fn) decltype(&::fn) fn = nullptr;
  SONDE_CUPTI_FUNCTIONS(SONDE_CUPTI_POINTER)
  SONDE_CUPTI_PROFILER_FUNCTIONS(SONDE_CUPTI_POINTER)
#undef SONDE_CUPTI_POINTER
  // CUDA 13.0's subscriber that names the holder of CUPTI; nullptr in CUPTI 12.
  decltype(&::cuptiSubscribe_v2) cuptiSubscribe_v2 = nullptr;
  // The ids of CUDA graphs and their nodes (CUDA 11.1 on), which tie a replayed kernel to the
  // call path its node was created in; all nullptr where one is missing.
  decltype(&::cuptiGetGraphNodeId) cuptiGetGraphNodeId = nullptr;
  decltype(&::cuptiGetGraphId) cuptiGetGraphId = nullptr;
  decltype(&::cuptiGetGraphExecId) cuptiGetGraphExecId = nullptr;
  // The subscriber-scope activity calls (cupti_v2_abi.hpp); all nullptr where one is missing.
  CuptiActivityRegisterCallbacksV2 cuptiActivityRegisterCallbacks_v2 = nullptr;
  CuptiActivityEnableV2 cuptiActivityEnable_v2 = nullptr;
  CuptiActivityGetNextRecordV2 cuptiActivityGetNextRecord_v2 = nullptr;
  std::string path;  // the file that was opened
  void* handle = nullptr;

  // `override_path` (SONDE_CUPTI_LIBRARY) alone when set; else the CUPTI of the CUDA runtime
  // the program loaded, beside it first (cupti_search.hpp), then by the loader's search and the
  // CUDA install paths. False with a reason when no usable library is found.
  bool load(const std::string& override_path, std::string& error);
  // The range profiler's functions, from the same library; false with the first one missing.
  bool load_profiler(std::string& error);
  // CUPTI's own text for `result`.
  std::string describe(CUptiResult result) const;
};

}  // namespace sonde
