#include "sonde/in_process.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>

#include "process/signals.hpp"
#include "runtime/log.hpp"
#include "runtime/runtime.hpp"
#include "sonde/process_hooks.hpp"
#include "symbols/rebind.hpp"

namespace sonde {

namespace {

// What a rebinding pass could not do goes in the profile, as a note; how long it took, in the
// debug log.
void rebound(const RebindPass& pass) {
  if (pass.objects == 0) return;
  log(LogLevel::kDebug, "{}", rebind_summary(pass));
  std::string note = rebind_note(pass);
  if (Runtime* rt = Runtime::get(); rt != nullptr && !note.empty())
    rt->add_note("rebind", note, false);
}

}  // namespace

bool in_process_begin(const std::string& shown) {
  Runtime* rt = Runtime::get();
  if (rt == nullptr || !rt->recording()) return false;
  rt->loaded_in_process(shown);
  // libc came before sonde in the global scope: what was bound to it, and what objects
  // loaded from now on would bind to it, is pointed at sonde's wrappers as LD_PRELOAD would.
  rebound(rebind_loaded_objects());
  log(LogLevel::kDebug, "rebound functions: {}", fmt::join(rebound_functions(), " "));
  return true;
}

namespace {

// Rebinds the objects loaded since the last pass.
void rebind_new() {
  RebindPass pass = rebind_new_objects();
  rebound(pass);
  // Their constructors ran inside the dlopen, before the rebinding: a thread pool they started
  // (OpenBLAS's) passed sonde's pthread_create.
  if (Runtime* rt = Runtime::get(); rt != nullptr && pass.objects > 0) rt->sample_other_threads();
}

}  // namespace

const void* dlopen_return_gadget(const void* caller) {
  if (!rebinding()) return nullptr;
  const void* ret = return_gadget(caller);
  // No way back through sonde (shadow stacks, a caller sonde did not rebind): what earlier
  // dlopens loaded is rebound at least here, at the next one.
  if (ret == nullptr) rebind_new();
  return ret;
}

void library_opened(void* handle) {
  if (handle != nullptr) rebind_new();
}

void in_process_exit_begins(int status) { exit_begins(status); }

void in_process_flush_before_teardown(int status) {
  if (Runtime* rt = Runtime::get()) rt->flush_before_teardown(status);
}

void in_process_signal_set(int sig) { adopt_kernel_action(sig); }

std::string in_process_preload() {
  constexpr std::string_view kPrefix = "LD_PRELOAD=";
  Runtime* rt = Runtime::get();
  if (rt == nullptr || !rt->env_preload().starts_with(kPrefix)) return "";
  return rt->env_preload().substr(kPrefix.size());
}

std::vector<std::string> in_process_run_env() {
  std::vector<std::string> result;
  for (const char* name : {"SONDE_RUN_ID", "SONDE_OUTPUT", "SONDE_PROCESS"}) {
    if (const char* value = std::getenv(name)) result.push_back(std::string(name) + "=" + value);
  }
  return result;
}

}  // namespace sonde

// CUDA's injection entry: the driver's cuInit opens the library CUDA_INJECTION64_PATH names
// and calls this (the mechanism CUPTI's injection samples use). The in-process launcher names
// libsonde there, for a driver loaded past sonde's dlopen wrapper (by an object sonde could not
// rebind).
extern "C" SONDE_API int InitializeInjection(void) {
  if (sonde::Runtime* rt = sonde::Runtime::get()) rt->cuda_loaded();
  return 1;
}
