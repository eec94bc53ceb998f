#include "runtime/python_presence.hpp"

#include <dlfcn.h>

#include <atomic>

#include "symbols/loaded_objects.hpp"
#include "symbols/loader_free.hpp"

namespace sonde {

namespace {
// Whether the process holds a Python interpreter: -1 not asked yet, 0 no, 1 yes. Asked at start
// and at every flush outside a signal's (LoaderFree), whose interrupted thread may hold the
// loader's lock; a fork child inherits the answer. Once yes, it stays yes.
std::atomic<int> g_python{-1};
}  // namespace

void remember_python_presence() {
  if (g_python.load() <= 0 && !loader_free())
    g_python.store(dlsym(RTLD_DEFAULT, "Py_IsInitialized") != nullptr ? 1 : 0);
}

bool python_without_hook(Facts& facts) {
  remember_python_presence();
  // sonde.launch: python3 -m sonde ran here, whose hook a program that never ran (a
  // SyntaxError) never started; its note would tell the user to do what was done.
  return g_python.load() == 1 && !facts.has("python.hook") && !facts.has("sonde.launch");
}

namespace {

// Whether libtorch is mapped, asked where the loader may be (not in a signal's flush, which
// keeps what an earlier flush found): the python-hook note names torch's losses only where
// torch ran (a red team's mpi4py programs were told torch.distributed's collectives were not
// recorded, in every `sonde ranks`).
bool torch_loaded(Facts& facts) {
  if (facts.has("python.torch_loaded")) return true;
  if (loader_free()) return false;
  bool found = !loaded_object({"libtorch_cpu", "libc10."}).empty();
  if (found) facts.set("python.torch_loaded", "1");
  return found;
}

}  // namespace

std::string python_hook_note(Facts& facts) {
  const char* kNativeOnly = torch_loaded(facts)
                                ? "its profile holds native calls only (no Python frames, torch "
                                  "operators or torch.distributed collectives)"
                                : "its profile holds native calls only (no Python frames)";
  if (std::optional<std::string> why = facts.get("python.hook_failed"))
    return "this process is a Python interpreter whose sonde Python hook did not start: " + *why +
           "; " + kNativeOnly;
  return std::string(
             "this process is a Python interpreter that ran without sonde's Python hook: ") +
         kNativeOnly +
         "; run it with python3 -m sonde, or sonde run --python. A child interpreter of such a "
         "run starts the hook through PYTHONPATH, which -I and -E ignore and a cleared "
         "environment (env -i, subprocess's env={}) drops";
}

}  // namespace sonde
