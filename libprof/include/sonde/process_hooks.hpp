// Hooks that the process-level wrappers (wrappers/process: exec, _exit, pthread_create, dlopen)
// call into libprof, and the facts wrappers contribute to a run's metadata.
#pragma once

#include <cstdint>

namespace sonde {

// The entries prepare_exec writes, on the caller's stack: not thread-local, since libsonde's
// thread-local block must stay small (core/per_thread.hpp says why).
struct ExecStrings {
  char preload[8192];  // LD_PRELOAD with sonde in front of the child's own
  char process_ref[64];
  char exec_of[64];
};

// Flushes everything and marks this process image as ended by exec; returns an environment for
// the new image that carries the preload and the run (entries point into `envp`, `strings` or
// storage owned by sonde). Safe in a vfork child: then it allocates nothing and flushes nothing.
char* const* prepare_exec(char* const* envp, char** scratch, int scratch_len, ExecStrings& strings);
// The exec after prepare_exec failed and returned: this image goes on, its periodic flushes too.
void exec_returned();
// The same for a new process this one starts with `envp` (posix_spawn): nothing flushed, the
// new image a child of this process.
char* const* prepare_spawn(char* const* envp, char** scratch, int scratch_len,
                           ExecStrings& strings);
int exec_env_extra();  // how many entries either may add (size `scratch` for it)

// The process is about to end without atexit (_exit): final flush.
void before_process_exit(int status);

// The host's main is about to run (the program started through __libc_start_main).
void main_starts();

// The host's exit begins (main returned or exit was called), before any exit handler runs;
// `status` as exit was given it (-1: not known, an in-process Python's end).
void exit_begins(int status = -1);

// The host is about to change the process's user or group ids, which glibc does on every
// thread: sonde's own thread is stopped for the call (true when it was) and started again by
// credentials_changed() (wrappers/process/credential_wrappers.cpp).
bool credentials_changing();
void credentials_changed();

// The calling thread is about to enter SECCOMP_MODE_STRICT (prctl): from then on the kernel
// kills it for any system call but read, write, exit and sigreturn, and for rdtsc (a SIGSEGV),
// so sonde measures nothing more on it (true: it was told; `entered` false undoes it when the
// call failed).
void strict_sandbox(bool entered);

// The calling thread is about to install a seccomp filter (prctl PR_SET_SECCOMP, or the seccomp
// system call; `every_thread`: SECCOMP_FILTER_FLAG_TSYNC). The filter may kill at any system
// call, so sonde flushes now and makes none of its own on a filtered thread afterwards. True
// when sonde made ready for it: then seccomp_filter_refused() undoes that if the call failed.
// `program`: the call's struct sock_fprog pointer as the host passed it (sonde reads it without
// trusting it).
bool seccomp_filter_coming(bool every_thread, const void* program);
void seccomp_filter_refused(bool every_thread);
// Whether the calling thread runs under a filter sonde saw installed: the threads it creates
// do too (the kernel copies the filter), and are not measured.
bool thread_filtered();

// A thread created through pthread_create starts running (`filtered`: its creator was, see
// thread_filtered). It is registered later, at its first measured call, so that idle threads
// are never recorded.
void thread_started(bool filtered);

// A library was opened with RTLD_DEEPBIND: its calls may bypass the preload.
void note_deepbind(const char* file);

// dlopen(file, flags) is about to run: opening the CUDA driver starts the GPU side (CUPTI).
void library_opening(const char* file, int flags);

// Loaded in-process (runtime/in_process.cpp), sonde rebinds each object dlopen loads: the
// address dlopen, called from `caller`, must return to for that (symbols/rebind.hpp,
// return_gadget), nullptr where it is not needed or cannot be had; and the call after a dlopen
// that returned `handle` through it.
const void* dlopen_return_gadget(const void* caller);
void library_opened(void* handle);

// Wrappers add facts about their library (e.g. blas.library, blas.threads) at flush time.
using InfoEmit = void (*)(const char* key, const char* value, void* ctx);
using InfoProvider = void (*)(InfoEmit emit, void* ctx);
void register_info_provider(InfoProvider provider);

// A warning that belongs in the profile (and once on stderr).
void add_note(const char* topic, const char* message);

// True when the main executable itself defines `function` (in .symtab or .dynsym): a library
// linked statically, out of LD_PRELOAD's reach.
bool executable_defines(const char* function);

}  // namespace sonde
