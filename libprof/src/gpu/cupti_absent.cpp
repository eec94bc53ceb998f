// Built without the CUPTI headers: CUDA processes are profiled on the CPU side only.
#include "gpu/gpu_backend.hpp"

namespace sonde {

std::unique_ptr<GpuBackend> make_cupti_backend(const std::string&, const std::vector<std::string>&,
                                               const NoteSink& note, CollectionWindow&) {
  note("gpu",
       "this sonde was built without the CUPTI headers: CUDA calls and GPU activity are "
       "recorded only by the preloaded wrappers");
  return nullptr;
}

}  // namespace sonde
