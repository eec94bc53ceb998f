#include "runtime/runtime.hpp"
#include "sonde/gpu.hpp"

namespace sonde {

// The preloaded wrappers measure the CUDA API until CUPTI's callbacks do.
bool gpu_api_traced_by_cupti() {
  Runtime* rt = Runtime::get();
  GpuBackend* gpu = rt ? rt->gpu() : nullptr;
  return gpu != nullptr && gpu->api_traced();
}

}  // namespace sonde
