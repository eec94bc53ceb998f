// What libprof's GPU side (CUPTI) tells the GPU wrappers. The CUDA runtime and driver are
// measured by CUPTI's callback API when it can subscribe (that sees statically linked runtimes
// and cuGetProcAddress), else by the preloaded wrappers; never both, so no call counts twice.
#pragma once

#include "sonde/probe.hpp"

namespace sonde {

// True while CUPTI callbacks record CUDA runtime and driver API calls in this process: the
// preloaded libcudart/libcuda wrappers then forward without measuring.
SONDE_API bool gpu_api_traced_by_cupti();

}  // namespace sonde
