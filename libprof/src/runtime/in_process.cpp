#include "sonde/in_process.hpp"

#include <cstdlib>
#include <memory>

#include "process/signals.hpp"
#include "runtime/runtime.hpp"
#include "sonde/process_hooks.hpp"

namespace sonde {

bool in_process_begin(const std::string& shown) {
  Runtime* rt = Runtime::get();
  if (rt == nullptr || !rt->recording()) return false;
  rt->loaded_in_process(shown);
  return true;
}

void in_process_exit_begins() { exit_begins(); }

void in_process_before_exit(int status) { before_process_exit(status); }

namespace {

using JoinFn = char* const* (*)(char* const*, char**, int, ExecStrings&);

std::vector<std::string> joined(const std::vector<std::string>& env, JoinFn join) {
  std::vector<char*> envp;
  envp.reserve(env.size() + 1);
  for (const std::string& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
  envp.push_back(nullptr);
  std::vector<char*> scratch(env.size() + size_t(exec_env_extra()) + 1);
  auto strings = std::make_unique<ExecStrings>();
  char* const* out = join(envp.data(), scratch.data(), int(scratch.size()), *strings);
  std::vector<std::string> result;
  for (char* const* e = out; e != nullptr && *e != nullptr; ++e) result.emplace_back(*e);
  return result;
}

}  // namespace

std::vector<std::string> in_process_exec_env(const std::vector<std::string>& env) {
  return joined(env, prepare_exec);
}

std::vector<std::string> in_process_spawn_env(const std::vector<std::string>& env) {
  return joined(env, prepare_spawn);
}

void in_process_signal_set(int sig) { adopt_kernel_action(sig); }

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
// libsonde there, since CPython's dlopen of the driver never reaches sonde's dlopen wrapper.
extern "C" SONDE_API int InitializeInjection(void) {
  if (sonde::Runtime* rt = sonde::Runtime::get()) rt->cuda_loaded();
  return 1;
}
