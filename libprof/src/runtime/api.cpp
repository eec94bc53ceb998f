// The C API of sonde.h and the hooks of process_hooks.hpp.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/probe_inline.hpp"
#include "core/thread_local_state.hpp"
#include "process/sampler.hpp"
#include "runtime/fpu_mode.hpp"
#include "runtime/runtime.hpp"
#include "sonde/gpu.hpp"
#include "sonde/process_hooks.hpp"
#include "sonde/routine_kinds.hpp"
#include "sonde/sonde.h"
#include "symbols/elf_symbols.hpp"

#define SONDE_EXPORT extern "C" __attribute__((visibility("default")))

namespace sonde {

namespace {

RoutineId region_id(ThreadState* t, Runtime* rt, const char* name) {
  auto slot = (reinterpret_cast<uintptr_t>(name) >> 3) & 63;
  ThreadState::RegionCacheEntry& c = t->region_cache[slot];
  // The pointer is the fast key; the comparison guards against a reused buffer.
  if (c.name == name && c.copy != nullptr && std::strcmp(c.copy, name) == 0) return c.id;
  c.id = rt->routines().intern({name, kinds::kRegion, ""});
  free(const_cast<char*>(c.copy));
  c.copy = strdup(name);
  c.name = name;
  return c.id;
}

void region_begin(const char* name) {
  Runtime* rt = Runtime::get();
  if (rt == nullptr || name == nullptr) return;
  ThreadState* t = rt->attach_current_thread();
  if (t == nullptr) return;
  if (__builtin_expect(t->window_closed(), 0) && !rt->window().region_begins(name)) {
    ++t->regions_before_window;  // its end must not count as a mismatch
    return;
  }
  // A begin refused (beyond SONDE_MAX_DEPTH, the node limit) is one of the innermost open
  // regions: the next end is its own, and must close nothing (it closed an outer region of the
  // same name, and the ends after it read as mismatches).
  if (probe_enter(region_id(t, rt, name), Nesting::kRegion) == nullptr) ++t->regions_refused;
}

void region_end(const char* name) {
  Runtime* rt = Runtime::get();
  ThreadState* t = t_state;
  if (rt == nullptr || t == nullptr || name == nullptr) return;
  if (t->regions_refused > 0) {
    --t->regions_refused;
    return;
  }
  RoutineId id = region_id(t, rt, name);
  uint32_t d = t->depth();
  uint32_t i = d;
  while (i > 0 && t->nodes[t->stack_[i].node.load(std::memory_order_relaxed)].routine != id) --i;
  if (i == 0 && t->regions_before_window > 0) {
    --t->regions_before_window;  // begun before the window: nothing was recorded
    return;
  }
  if (i == 0 && t->take_region_closed_by_frame(id)) return;  // closed by its frame's return
  if (i == 0 || t->stack_[i].nesting != Nesting::kRegion) {
    bump(t->region_mismatches, 1);
    return;
  }
  if (i != d) bump(t->region_mismatches, 1);
  // Frames left open above the region close with it, as an exception unwinding them would.
  while (t->depth() >= i) probe_exit(t, nullptr, nullptr);
}

// A child given an LD_PRELOAD of its own (`LD_PRELOAD=libfoo.so ./child` from a script) keeps
// sonde in front of it, so the run's children stay followed. Into the caller's storage, not
// allocated: this runs in vfork children too.
char* keep_sonde_preloaded(Runtime* rt, char* entry, bool vfork_child, ExecStrings& out) {
  if (std::strstr(entry, "libsonde") != nullptr) return entry;
  char* merged = out.preload;
  const std::string& ours = rt->env_preload();  // "LD_PRELOAD=/path/libsonde.so"
  const char* theirs = entry + std::strlen("LD_PRELOAD=");
  int len =
      std::snprintf(merged, sizeof out.preload, "%s%s%s", ours.c_str(), *theirs ? ":" : "", theirs);
  if (len > 0 && size_t(len) < sizeof out.preload) return merged;
  if (!vfork_child) {
    rt->add_note("exec",
                 "a child was exec'd with an LD_PRELOAD too long to put sonde in front "
                 "of it: that child is not profiled");
  }
  return entry;
}

// The environment of a new image that inherits this thread's seccomp filter: without sonde in
// LD_PRELOAD, since sonde's start there (its file, its thread) is made of system calls the
// filter may kill for. The image runs unprofiled, as the filter's note says.
char* const* without_sonde(char* const* envp, char** scratch, int scratch_len,
                           ExecStrings& strings) {
  int n = 0;
  for (char* const* e = envp; *e != nullptr; ++e) {
    if (n >= scratch_len - 1) return envp;
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0 || std::strstr(*e, "libsonde") == nullptr) {
      scratch[n++] = *e;
      continue;
    }
    // ld.so splits the list at colons and spaces: every element but sonde's is kept. Nothing
    // allocated: this may be a vfork child, and under the filter.
    char* out = strings.preload;
    size_t len = std::snprintf(out, sizeof strings.preload, "LD_PRELOAD=");
    bool any = false, fits = true;
    std::string_view rest(*e + 11);
    while (!rest.empty()) {
      size_t end = std::min(rest.find_first_of(": "), rest.size());
      std::string_view item = rest.substr(0, end);
      rest.remove_prefix(std::min(end + 1, rest.size()));
      if (item.empty() || item.find("libsonde") != std::string_view::npos) continue;
      if (len + item.size() + 2 > sizeof strings.preload) {
        fits = false;
        break;
      }
      if (any) out[len++] = ':';
      std::memcpy(out + len, item.data(), item.size());
      len += item.size();
      out[len] = '\0';
      any = true;
    }
    if (!any || !fits) continue;
    scratch[n++] = strings.preload;
  }
  scratch[n] = nullptr;
  return scratch;
}

}  // namespace

namespace {

// The environment of a new image that joins the run: this process's own next image (an exec:
// flushed first, the image marked as its successor) or a new process's (a vfork child's exec,
// posix_spawn: no flush, a child of this process).
char* const* join_run(char* const* envp, char** scratch, int scratch_len, ExecStrings& strings,
                      bool own_image) {
  Runtime* rt = Runtime::get();
  if (rt == nullptr || !rt->recording() || envp == nullptr) return envp;
  if (rt->filtered()) return without_sonde(envp, scratch, scratch_len, strings);
  // In a vfork child (Python's subprocess uses vfork) the parent's memory is shared: no flush,
  // no allocation, only pointers and thread-local buffers.
  bool vfork_child = getpid() != rt->pid();
  own_image = own_image && !vfork_child;
  if (own_image) {
    if (t_state != nullptr) sampler_disarm(*t_state);
    rt->flush(FlushKind::kExec, "exec");
  }
  auto starts = [](const char* s, const char* prefix) {
    return std::strncmp(s, prefix, std::strlen(prefix)) == 0;
  };
  int n = 0;
  bool has_preload = false, has_output = false, has_run = false, other_output = false;
  bool has_record_args = false;
  for (char* const* e = envp; *e != nullptr; ++e) {
    if (n >= scratch_len - exec_env_extra() - 1) return envp;
    if (starts(*e, "SONDE_EXEC_OF=") || starts(*e, "SONDE_PROCESS=") ||
        starts(*e, "SONDE_SAY_WRITTEN="))
      continue;
    if (starts(*e, "LD_PRELOAD=")) {
      has_preload = true;
      scratch[n++] = keep_sonde_preloaded(rt, *e, vfork_child, strings);
      continue;
    }
    if (starts(*e, "SONDE_OUTPUT=")) {
      has_output = true;
      // The name this process was given, where it wrote its rank's own file: a wrapper script
      // exec'ing its rank's program passes that (bash passes main's environment, which sonde's
      // setenv never reached); the program joins the rank's file, not a file beside it.
      if (!rt->env_given_output().empty() && std::strcmp(*e, rt->env_given_output().c_str()) == 0) {
        scratch[n++] = const_cast<char*>(rt->env_output().c_str());
        continue;
      }
      // Another output is a run of its own (a nested `sonde run`), which must not join ours.
      other_output = std::strcmp(*e, rt->env_output().c_str()) != 0;
    }
    has_run |= starts(*e, "SONDE_RUN_ID=");
    has_record_args |= starts(*e, "SONDE_RECORD_ARGS=");
    scratch[n++] = *e;
  }
  // An environment built from scratch still carries the run.
  if (!has_preload) scratch[n++] = const_cast<char*>(rt->env_preload().c_str());
  if (!has_output) scratch[n++] = const_cast<char*>(rt->env_output().c_str());
  if (!has_run && !other_output) scratch[n++] = const_cast<char*>(rt->env_run().c_str());
  // A run told to keep its commands' arguments out (`--no-record-args`) keeps them out of the
  // children it gives an environment of their own too.
  if (!has_record_args && !other_output && !rt->config().record_args)
    scratch[n++] = const_cast<char*>("SONDE_RECORD_ARGS=0");
  std::snprintf(strings.process_ref, sizeof strings.process_ref, "SONDE_PROCESS=%d:%lld",
                int(rt->pid()), (long long)rt->process_id());
  scratch[n++] = strings.process_ref;
  if (own_image) {
    std::snprintf(strings.exec_of, sizeof strings.exec_of, "SONDE_EXEC_OF=%d:%lld", int(rt->pid()),
                  (long long)rt->process_id());
    scratch[n++] = strings.exec_of;
    if (!rt->env_say().empty()) scratch[n++] = const_cast<char*>(rt->env_say().c_str());
  }
  scratch[n] = nullptr;
  return scratch;
}

}  // namespace

char* const* prepare_exec(char* const* envp, char** scratch, int scratch_len,
                          ExecStrings& strings) {
  return join_run(envp, scratch, scratch_len, strings, true);
}

char* const* prepare_spawn(char* const* envp, char** scratch, int scratch_len,
                           ExecStrings& strings) {
  return join_run(envp, scratch, scratch_len, strings, false);
}

int exec_env_extra() { return 7; }

void before_process_exit(int status) {
  // _exit may be called from a signal handler that interrupted malloc or a sonde lock: the
  // flusher thread does the work, and the wait for it is bounded, never a hang.
  Runtime* rt = Runtime::get();
  // Not a vfork child's (Python's subprocess, its exec failed): it shares its parent's memory.
  if (rt != nullptr && !rt->filtered() && getpid() == rt->pid()) {
    rt->set_exit_status(status);
    rt->flush_from_signal(Runtime::kExitRequest);
  }
}

void exec_returned() {
  if (Runtime* rt = Runtime::get()) rt->exec_returned();
}

void main_starts() {
  if (Runtime* rt = Runtime::get()) rt->main_starts();
}

void exit_begins(int status) {
  if (Runtime* rt = Runtime::get()) rt->exit_begins(status);
}

bool credentials_changing() {
  Runtime* rt = Runtime::get();
  return rt != nullptr && rt->credentials_changing();
}

void credentials_changed() {
  if (Runtime* rt = Runtime::get()) rt->credentials_changed();
}

void thread_started(bool filtered) {
  // Before the start routine, so the thread's first float operation already runs in the mode.
  apply_fpu_mode();
  if (filtered) {
    // Under its creator's filter from its first instruction: registering it would take system
    // calls (its tid, memory, a timer), so it is never measured (the filter's note says so).
    t_filtered = true;
    t_internal = true;
    return;
  }
  // Not attached here: a thread is registered at its first measured call (probe.cpp), so a
  // library's worker pool that never makes one (OpenBLAS's) is never recorded. Attaching at
  // creation recorded it only when it happened to start after sonde's constructor, so the
  // same program gave one thread or two from run to run.
  // Sampled runs are the exception: a pool thread's CPU time is what the sampler is for, so
  // the thread is armed (and recorded) from its start; its samples fall under its root.
  if (sampler_on()) {
    if (Runtime* rt = Runtime::get()) rt->attach_current_thread(true);
  }
}

void note_deepbind(const char* file) {
  // CUPTI opens its profiler host library so (seen on an H200 under SONDE_GPU_METRICS): it is
  // sonde's own doing, and libnvperf calls nothing sonde measures.
  std::string_view name = file != nullptr ? file : "";
  std::string_view base = name.substr(name.rfind('/') + 1);  // npos + 1 == 0: the whole name
  if (base.starts_with("libnvperf_")) return;
  if (Runtime* rt = Runtime::get()) {
    rt->add_note("deepbind", fmt::format("{} was opened with RTLD_DEEPBIND: the calls it makes "
                                         "into its own dependencies bypass sonde",
                                         file ? file : "(main program)"));
  }
}

void library_opening(const char* file, int flags) {
  if (Runtime* rt = Runtime::get()) rt->cuda_opening(file, flags);
}

void register_info_provider(InfoProvider provider) {
  if (Runtime* rt = Runtime::get()) rt->register_info_provider(provider);
}

void add_note(const char* topic, const char* message) {
  if (Runtime* rt = Runtime::get()) rt->add_note(topic, message);
}

// The API's functions that allocate never throw: their callers are the Python hook's, the torch
// observer's and the wrappers' C and C++ callbacks, which CPython and libtorch call from their
// own frames, where a std::bad_alloc ended the process (std::terminate) of a program at its
// `ulimit -v` that alone ran on (a red-team find). Without memory, a fact or note is not kept.
void set_run_fact(const char* key, const char* value) {
  Runtime* rt = Runtime::get();
  if (rt != nullptr && key != nullptr && *key != '\0' && value != nullptr) try {
      rt->facts().set(key, value);
    } catch (...) {
    }
}

void add_run_note(const char* topic, const char* message, bool warning) {
  // Kept for the profile, not printed: the program's stderr stays its own.
  Runtime* rt = Runtime::get();
  if (rt != nullptr && topic != nullptr && message != nullptr) try {
      rt->add_note(topic, message, false, warning ? "warning" : "info");
    } catch (...) {
    }
}

void end_helper_at_exit(int fd, int pid) {
  Runtime* rt = Runtime::get();
  if (rt != nullptr && !rt->filtered()) rt->exit_helpers().add(fd, pid_t(pid));
}

// The probe's and the wrappers' ways into the runtime (core/, gpu/ and process/ reach it only
// through what they are handed).
__attribute__((noinline)) ThreadState* inline_probe::attach_current() {
  int saved = errno;
  Runtime* rt = Runtime::get();
  // A thread whose first calls come before the collection window opens attaches once it has.
  ThreadState* t = rt && !rt->window().closed() ? rt->attach_current_thread() : nullptr;
  errno = saved;
  return t;
}

void add_run_note_later(const char* topic, const char* message) {
  if (Runtime* rt = Runtime::get()) rt->add_note_later(topic, message);
}

RoutineId register_routine(const RoutineSpec& spec) {
  Runtime* rt = Runtime::get();
  if (rt == nullptr) return 0;
  // Made at the first registration, while there is memory: what a routine registered without
  // any is recorded as (its calls and time kept, its name lost); 0, the root's, before it is.
  static std::atomic<RoutineId> unnamed{0};
  try {
    if (unnamed.load(std::memory_order_relaxed) == 0)
      unnamed.store(rt->routines().intern({"<no memory for its name>", kinds::kPython, "", "", 0}),
                    std::memory_order_relaxed);
    return rt->routines().intern(spec);
  } catch (...) {
    return unnamed.load(std::memory_order_relaxed);
  }
}

void set_mpi_rank(int rank, int world_size, const char* who) {
  if (Runtime* rt = Runtime::get()) rt->mpi_rank_known(rank, world_size, who);
}

// The preloaded wrappers measure the CUDA API until CUPTI's callbacks do.
bool gpu_api_traced_by_cupti() {
  Runtime* rt = Runtime::get();
  GpuBackend* gpu = rt ? rt->gpu() : nullptr;
  return gpu != nullptr && gpu->api_traced();
}

bool executable_defines(const char* function) {
  static const auto* exe = new ElfSymbols("/proc/self/exe");  // never destroyed: see symbolize
  return exe->defines(function);
}

}  // namespace sonde

SONDE_EXPORT void sonde_impl_region_begin(const char* name) { sonde::region_begin(name); }
SONDE_EXPORT void sonde_impl_region_end(const char* name) { sonde::region_end(name); }
SONDE_EXPORT void sonde_impl_region_bytes(const char* name, unsigned long long bytes) {
  if (name == nullptr || *name == '\0') return;
  sonde::set_run_fact(("region.bytes:" + std::string(name)).c_str(), std::to_string(bytes).c_str());
}
// The autostart's word where the Python hook could not start in a child interpreter (no
// extension for its CPython in this install, the package unreadable): the python-hook note
// then says why, where it told the user to do what had been done (a red-team find).
SONDE_EXPORT void sonde_impl_python_hook_failed(const char* why) {
  if (why != nullptr && *why != '\0') sonde::set_run_fact("python.hook_failed", why);
}
SONDE_EXPORT int sonde_impl_flush(void) {
  sonde::Runtime* rt = sonde::Runtime::get();
  return rt != nullptr && rt->flush(sonde::FlushKind::kExplicit) ? 0 : -1;
}
SONDE_EXPORT int sonde_impl_active(void) {
  sonde::Runtime* rt = sonde::Runtime::get();
  return rt != nullptr && rt->recording() ? 1 : 0;
}
SONDE_EXPORT void sonde_region_begin(const char* name) { sonde::region_begin(name); }
SONDE_EXPORT void sonde_region_end(const char* name) { sonde::region_end(name); }
SONDE_EXPORT void sonde_region_bytes(const char* name, unsigned long long bytes) {
  sonde_impl_region_bytes(name, bytes);
}
SONDE_EXPORT int sonde_flush(void) { return sonde_impl_flush(); }
SONDE_EXPORT int sonde_active(void) { return sonde_impl_active(); }
