#include "runtime/python_presence.hpp"

#include <dlfcn.h>

#include <atomic>

#include "symbols/loader_free.hpp"

namespace sonde {

bool python_without_hook(Facts& facts) {
  // Asked once outside a signal's flush (LoaderFree), and at a flush before one: whether the
  // process holds an interpreter does not change back.
  static std::atomic<int> python{-1};
  if (python.load() <= 0 && !loader_free())
    python.store(dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr ? 1 : 0);
  // sonde.launch: python3 -m sonde ran here, whose hook a program that never ran (a
  // SyntaxError) never started; its note would tell the user to do what was done.
  return python.load() == 1 && !facts.has("python.hook") && !facts.has("sonde.launch");
}

}  // namespace sonde
