#include "gpu/cupti_library.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include "gpu/cupti_search.hpp"

namespace sonde {

namespace {

// The driver's CUDA version (13000 for 13.0), 0 when the driver is not loaded or cannot say.
// cuDriverGetVersion needs no cuInit.
int loaded_driver_version() {
  void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (driver == nullptr) return 0;
  int version = 0;
  using Fn = int (*)(int*);
  auto get = reinterpret_cast<Fn>(dlsym(driver, "cuDriverGetVersion"));
  if (get == nullptr || get(&version) != 0) version = 0;
  dlclose(driver);  // NOLOAD took a reference; the driver stays loaded
  return version;
}

}  // namespace

bool CuptiLibrary::load(const std::string& override_path, std::string& error) {
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
    std::string runtime = loaded_cuda_runtime();
    for (const std::string& file : cupti_candidates(runtime, loaded_driver_version())) {
      open(file.c_str());
      if (handle != nullptr) break;
    }
    if (handle == nullptr && !runtime.empty()) tried += fmt::format("; the runtime is {}", runtime);
  }
  if (handle == nullptr) {
    error = fmt::format("libcupti could not be loaded ({})", tried);
    return false;
  }
  // A library that lacks one of them is too old for sonde.
#define SONDE_CUPTI_RESOLVE(fn)                                                             \
  fn = reinterpret_cast<decltype(fn)>(dlsym(handle, #fn));                                  \
  if (fn == nullptr) {                                                                      \
    error = fmt::format("{} lacks {}: a CUPTI from CUDA 12 or later is needed", path, #fn); \
    return false;                                                                           \
  }
  SONDE_CUPTI_FUNCTIONS(SONDE_CUPTI_RESOLVE)
#undef SONDE_CUPTI_RESOLVE
  cuptiSubscribe_v2 =
      reinterpret_cast<decltype(cuptiSubscribe_v2)>(dlsym(handle, "cuptiSubscribe_v2"));
  cuptiGetGraphNodeId =
      reinterpret_cast<decltype(cuptiGetGraphNodeId)>(dlsym(handle, "cuptiGetGraphNodeId"));
  cuptiGetGraphId = reinterpret_cast<decltype(cuptiGetGraphId)>(dlsym(handle, "cuptiGetGraphId"));
  cuptiGetGraphExecId =
      reinterpret_cast<decltype(cuptiGetGraphExecId)>(dlsym(handle, "cuptiGetGraphExecId"));
  if (!cuptiGetGraphNodeId || !cuptiGetGraphId || !cuptiGetGraphExecId) {
    cuptiGetGraphNodeId = nullptr;
    cuptiGetGraphId = nullptr;
    cuptiGetGraphExecId = nullptr;
  }
  cuptiActivityRegisterCallbacks_v2 = reinterpret_cast<CuptiActivityRegisterCallbacksV2>(
      dlsym(handle, "cuptiActivityRegisterCallbacks_v2"));
  cuptiActivityEnable_v2 =
      reinterpret_cast<CuptiActivityEnableV2>(dlsym(handle, "cuptiActivityEnable_v2"));
  cuptiActivityGetNextRecord_v2 = reinterpret_cast<CuptiActivityGetNextRecordV2>(
      dlsym(handle, "cuptiActivityGetNextRecord_v2"));
  if (!cuptiActivityRegisterCallbacks_v2 || !cuptiActivityEnable_v2 ||
      !cuptiActivityGetNextRecord_v2) {
    cuptiActivityRegisterCallbacks_v2 = nullptr;
    cuptiActivityEnable_v2 = nullptr;
    cuptiActivityGetNextRecord_v2 = nullptr;
  }
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
