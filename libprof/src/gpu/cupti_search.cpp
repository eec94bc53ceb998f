#include "gpu/cupti_search.hpp"

#include <link.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace sonde {

std::string loaded_cuda_runtime() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        const char* name = info->dlpi_name;
        if (name == nullptr || cuda_runtime_major(name) == 0) return 0;
        *static_cast<std::string*>(out) = name;
        return 1;
      },
      &found);
  return found;
}

int cuda_runtime_major(const std::string& cudart_path) {
  constexpr std::string_view kStem = "libcudart.so.";
  size_t slash = cudart_path.rfind('/');
  std::string_view base(cudart_path);
  if (slash != std::string::npos) base.remove_prefix(slash + 1);
  if (!base.starts_with(kStem)) return 0;
  int major = std::atoi(base.data() + kStem.size());
  return major > 0 ? major : 0;
}

std::vector<std::string> cupti_candidates(const std::string& cudart_path, int driver_version) {
  int runtime = cuda_runtime_major(cudart_path);
  std::vector<int> majors;
  if (runtime == 12 || runtime == 13) {
    majors = {runtime};  // another major's CUPTI would not match the runtime's callbacks
  } else if (driver_version > 0 && driver_version < 13000) {
    majors = {12};
  } else {
    majors = {13, 12};
  }
  std::vector<std::string> out;
  for (int major : majors) {
    std::string file = "libcupti.so." + std::to_string(major);
    if (runtime == major) {
      std::filesystem::path dir = std::filesystem::path(cudart_path).parent_path();
      // The runtime's own folder (CUDA 13's pip wheel nvidia/cu13/lib holds both), pip's CUDA
      // 12 packages (nvidia/cuda_runtime/lib beside nvidia/cuda_cupti/lib), and a toolkit's
      // extras/CUPTI/lib64 seen from lib64 or from targets/<arch>/lib.
      for (const char* rel :
           {".", "../../cuda_cupti/lib", "../extras/CUPTI/lib64", "../../../extras/CUPTI/lib64"}) {
        out.push_back((dir / rel / file).lexically_normal().string());
      }
    }
    out.push_back(file);  // the loader's search: LD_LIBRARY_PATH, ld.so.cache
    for (const char* dir : {"/usr/local/cuda/lib64", "/usr/local/cuda/extras/CUPTI/lib64",
                            "/usr/local/cuda/targets/x86_64-linux/lib"}) {
      out.push_back(std::string(dir) + "/" + file);
    }
  }
  return out;
}

}  // namespace sonde
