#include "sonde/gpu.hpp"

namespace sonde {

// Until the CUPTI backend subscribes, the preloaded wrappers measure the CUDA API.
bool gpu_api_traced_by_cupti() { return false; }

}  // namespace sonde
