#include "runtime/python_presence.hpp"

#include <dlfcn.h>

namespace sonde {

bool python_without_hook(Facts& facts) {
  return dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr && !facts.has("python.hook");
}

}  // namespace sonde
