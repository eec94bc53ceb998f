// The library constructor, kept out of sonde_core so that the unit tests link the real core
// without starting a profiler inside the test program. Only libsonde.so compiles this file.
#include <dlfcn.h>

#include "runtime/runtime.hpp"

namespace {

// Another copy of libsonde.so loaded before this one (a build and an install both preloaded)
// owns the run: two runtimes would write one file as two processes of one pid, and the one
// the wrappers never reach would report that nothing was intercepted. Preloading the same
// file twice loads it once; only a second file gets here.
bool another_copy_first(Dl_info& first, Dl_info& self) {
  void* global = dlsym(RTLD_DEFAULT, "sonde_impl_active");
  static int here;
  return global != nullptr && dladdr(global, &first) != 0 && dladdr(&here, &self) != 0 &&
         first.dli_fbase != self.dli_fbase;
}

}  // namespace

// Priority 101: before the wrappers' constructors register their routines.
__attribute__((constructor(101))) static void sonde_library_init() {
  Dl_info first{}, self{};
  if (another_copy_first(first, self)) {
    // Its wrappers find no runtime and forward every call to the real function.
    sonde::warn("{} is already loaded; this copy ({}) stays inactive", first.dli_fname,
                self.dli_fname);
    return;
  }
  sonde::Runtime::init();
}
