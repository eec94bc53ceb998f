#include "gpu/cupti_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

namespace sonde {

bool CuptiLibrary::load(const std::string& override_path, std::string& error) {
  static const char* const kCandidates[] = {
      "libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13",
      "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
      "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so.13"};
  std::string tried;
  auto open = [&](const char* file) {
    handle = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) {
      path = file;
    } else {
      const char* why = dlerror();
      tried += fmt::format("{}{}", tried.empty() ? "" : "; ", why ? why : file);
    }
  };
  if (!override_path.empty()) {
    open(override_path.c_str());
  } else {
    for (const char* file : kCandidates) {
      open(file);
      if (handle != nullptr) break;
    }
  }
  if (handle == nullptr) {
    error = fmt::format("libcupti could not be loaded ({})", tried);
    return false;
  }
  // A library that lacks one of them is too old (cuptiSubscribe_v2 arrived in CUDA 12.x/13).
#define SONDE_CUPTI_RESOLVE(fn)                                                             \
  fn = reinterpret_cast<decltype(fn)>(dlsym(handle, #fn));                                  \
  if (fn == nullptr) {                                                                      \
    error = fmt::format("{} lacks {}: a CUPTI from CUDA 13 or later is needed", path, #fn); \
    return false;                                                                           \
  }
  SONDE_CUPTI_FUNCTIONS(SONDE_CUPTI_RESOLVE)
#undef SONDE_CUPTI_RESOLVE
  return true;
}

bool CuptiLibrary::load_profiler(std::string& error) {
#define SONDE_CUPTI_RESOLVE(fn)                                                                    \
  fn = reinterpret_cast<decltype(fn)>(dlsym(handle, #fn));                                         \
  if (fn == nullptr) {                                                                             \
    error =                                                                                        \
        fmt::format("{} lacks {}: the range profiler of CUDA 12.6 or later is needed", path, #fn); \
    return false;                                                                                  \
  }
  SONDE_CUPTI_PROFILER_FUNCTIONS(SONDE_CUPTI_RESOLVE)
#undef SONDE_CUPTI_RESOLVE
  return true;
}

std::string CuptiLibrary::describe(CUptiResult result) const {
  const char* text = nullptr;
  if (cuptiGetResultString == nullptr || cuptiGetResultString(result, &text) != CUPTI_SUCCESS ||
      text == nullptr) {
    return fmt::format("CUPTI error {}", int(result));
  }
  return text;
}

}  // namespace sonde
