// Process-level interposition: threads are measured from their first instruction, exec'd
// images join the run (and the old image is flushed first), _exit flushes, exit and the return
// from main stop sonde's flusher before the exit handlers run, and libraries
// opened with RTLD_DEEPBIND are reported. These wrap libc itself, so they are written out
// rather than generated: each has its own reason to exist and its own hazards.
#include <dlfcn.h>
#include <pthread.h>
#include <spawn.h>
#include <stdarg.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <cstring>

#include "../intercept.hpp"
#include "sonde/process_hooks.hpp"

extern char** environ;

namespace {
#define SONDE_TABLE "process/process_calls.def"  // relative to wrapper_table.inc
#define SONDE_LIBC(NAME) SONDE_TABLE_ROW(NAME)
#include "../wrapper_table.inc"
#undef SONDE_LIBC
#undef SONDE_TABLE
}  // namespace

// The real libc functions, resolved when the library loads: exec runs in vfork children
// (Python's subprocess), where a first dlsym could allocate in memory the parent shares.
__attribute__((constructor(102))) void resolve_libc() {
  for (auto& symbol : g_real) symbol.get();
}

// quick_exit runs its handlers, then libc's own _exit, past the wrapper below: the process was
// lost from the profile. Registered before the program's own handlers, this one runs after
// them, so what they call is recorded too.
void flush_at_quick_exit() { sonde::before_process_exit(-1); }  // its status is not told
__attribute__((constructor(103))) void register_quick_exit() { at_quick_exit(flush_at_quick_exit); }

#define SONDE_REAL(name) \
  auto name##_fn = reinterpret_cast<decltype(&::name)>(g_real[size_t(Entry::name)].get())

namespace {

struct ThreadStart {
  void* (*routine)(void*);
  void* arg;
  bool filtered;  // the creator runs under a seccomp filter, and so will the thread
};

void* thread_trampoline(void* p) {
  ThreadStart start = *static_cast<ThreadStart*>(p);
  std::free(p);
  sonde::thread_started(start.filtered);
  return start.routine(start.arg);
}

using MainFn = int (*)(int, char**, char**);
MainFn g_main = nullptr;

// Returning from main calls exit inside libc, past any wrapper of exit: this frame sees it,
// and sees main begin, after the library constructors.
// Not noexcept: pthread_exit in main unwinds through it.
int main_then_exit(int argc, char** argv, char** envp) {
  sonde::main_starts();
  int status = g_main(argc, argv, envp);
  sonde::exit_begins(status & 0xff);  // what the parent sees: exit(-1) is 255
  return status;
}

// The environment for an exec'd image (JOIN: prepare_exec) or a spawned process's
// (prepare_spawn); `scratch` lives on the caller's stack, sized for envp plus what sonde adds.
#define SONDE_JOINED_ENV(JOIN, envp, out)                                                \
  int env_count_ = 0;                                                                    \
  for (char* const* e_ = (envp); e_ && *e_; ++e_) ++env_count_;                          \
  int scratch_len_ = env_count_ + ::sonde::exec_env_extra() + 1;                         \
  char** scratch_ = static_cast<char**>(__builtin_alloca(sizeof(char*) * scratch_len_)); \
  ::sonde::ExecStrings strings_;                                                         \
  char* const* out = ::sonde::JOIN((envp), scratch_, scratch_len_, strings_)
#define SONDE_EXEC_ENV(envp, out) SONDE_JOINED_ENV(prepare_exec, envp, out)

// An exec that returned failed (ENOENT, EACCES): the image goes on, errno as the exec left it.
int exec_failed(int result) {
  int saved = errno;
  ::sonde::exec_returned();
  errno = saved;
  return result;
}

// execl-style variadic arguments into an argv array on the stack.
#define SONDE_COLLECT_ARGS(first, ap, argv)                                         \
  int argc_ = 1;                                                                    \
  {                                                                                 \
    va_list count_;                                                                 \
    va_copy(count_, ap);                                                            \
    while (va_arg(count_, const char*) != nullptr) ++argc_;                         \
    va_end(count_);                                                                 \
  }                                                                                 \
  char** argv = static_cast<char**>(__builtin_alloca(sizeof(char*) * (argc_ + 1))); \
  argv[0] = const_cast<char*>(first);                                               \
  for (int i_ = 1; i_ < argc_; ++i_) argv[i_] = va_arg(ap, char*);                  \
  argv[argc_] = nullptr

}  // namespace

SONDE_EXPORT_C int pthread_create(pthread_t* thread, const pthread_attr_t* attr,
                                  void* (*routine)(void*), void* arg) {
  SONDE_REAL(pthread_create);
  auto* start = static_cast<ThreadStart*>(std::malloc(sizeof(ThreadStart)));
  if (start == nullptr) return pthread_create_fn(thread, attr, routine, arg);
  *start = ThreadStart{routine, arg, sonde::thread_filtered()};
  int rc = pthread_create_fn(thread, attr, thread_trampoline, start);
  if (rc != 0) std::free(start);
  return rc;
}

SONDE_EXPORT_C int execve(const char* path, char* const argv[], char* const envp[]) {
  SONDE_REAL(execve);
  SONDE_EXEC_ENV(envp, env);
  return exec_failed(execve_fn(path, argv, env));
}

SONDE_EXPORT_C int execv(const char* path, char* const argv[]) {
  SONDE_REAL(execve);
  SONDE_EXEC_ENV(environ, env);
  return exec_failed(execve_fn(path, argv, env));
}

SONDE_EXPORT_C int execvpe(const char* file, char* const argv[], char* const envp[]) {
  SONDE_REAL(execvpe);
  SONDE_EXEC_ENV(envp, env);
  return exec_failed(execvpe_fn(file, argv, env));
}

SONDE_EXPORT_C int execvp(const char* file, char* const argv[]) {
  SONDE_REAL(execvpe);
  SONDE_EXEC_ENV(environ, env);
  return exec_failed(execvpe_fn(file, argv, env));
}

SONDE_EXPORT_C int fexecve(int fd, char* const argv[], char* const envp[]) {
  SONDE_REAL(fexecve);
  SONDE_EXEC_ENV(envp, env);
  return exec_failed(fexecve_fn(fd, argv, env));
}

// glibc's posix_spawn execs the child inside libc, past the exec wrappers: a child given an
// environment without sonde's variables (Python's os.posix_spawn with env=, a C program's
// envp of its own) ran unprofiled. Its environment is joined here, as a fork child's exec's is.
SONDE_EXPORT_C int posix_spawn(pid_t* pid, const char* path,
                               const posix_spawn_file_actions_t* actions,
                               const posix_spawnattr_t* attr, char* const argv[],
                               char* const envp[]) {
  SONDE_REAL(posix_spawn);
  SONDE_JOINED_ENV(prepare_spawn, envp, env);
  return posix_spawn_fn(pid, path, actions, attr, argv, env);
}

SONDE_EXPORT_C int posix_spawnp(pid_t* pid, const char* file,
                                const posix_spawn_file_actions_t* actions,
                                const posix_spawnattr_t* attr, char* const argv[],
                                char* const envp[]) {
  SONDE_REAL(posix_spawnp);
  SONDE_JOINED_ENV(prepare_spawn, envp, env);
  return posix_spawnp_fn(pid, file, actions, attr, argv, env);
}

SONDE_EXPORT_C int execl(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  SONDE_COLLECT_ARGS(arg, ap, argv);
  va_end(ap);
  return execv(path, argv);
}

SONDE_EXPORT_C int execlp(const char* file, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  SONDE_COLLECT_ARGS(arg, ap, argv);
  va_end(ap);
  return execvp(file, argv);
}

SONDE_EXPORT_C int execle(const char* path, const char* arg, ...) {
  va_list ap;
  va_start(ap, arg);
  SONDE_COLLECT_ARGS(arg, ap, argv);
  char* const* envp = va_arg(ap, char* const*);
  va_end(ap);
  return execve(path, argv, envp);
}

// The exit handlers are about to run: sonde's flusher stops first (see Runtime::exit_begins).
SONDE_EXPORT_C __attribute__((noreturn)) void exit(int status) {
  SONDE_REAL(exit);
  sonde::exit_begins(status & 0xff);
  exit_fn(status);
  __builtin_unreachable();
}

SONDE_EXPORT_C int __libc_start_main(MainFn main, int argc, char** argv, void (*init)(),
                                     void (*fini)(), void (*rtld_fini)(), void* stack_end) {
  using StartFn = int (*)(MainFn, int, char**, void (*)(), void (*)(), void (*)(), void*);
  auto start_fn = reinterpret_cast<StartFn>(g_real[size_t(Entry::__libc_start_main)].get());
  g_main = main;
  return start_fn(main_then_exit, argc, argv, init, fini, rtld_fini, stack_end);
}

SONDE_EXPORT_C __attribute__((noreturn)) void _exit(int status) {
  SONDE_REAL(_exit);
  sonde::before_process_exit(status & 0xff);
  _exit_fn(status);
  __builtin_unreachable();
}

SONDE_EXPORT_C __attribute__((noreturn)) void _Exit(int status) {
  SONDE_REAL(_Exit);
  sonde::before_process_exit(status & 0xff);
  _Exit_fn(status);
  __builtin_unreachable();
}

// dlopen must not gain sonde as its caller: glibc resolves $ORIGIN, RUNPATH and the namespace
// from the return address. So the wrapper notes what it needs, then jumps (not calls) to the
// real dlopen with the host's return address still on the stack.
//
// Loaded in-process, sonde must also rebind what dlopen loaded (symbols/rebind.hpp) before the
// caller can call into it: then the real dlopen is given, as its return address, a `ret` in
// the caller's own object (glibc sees the caller it would have seen), and above it the address
// of sonde_dlopen_returned, where that `ret` lands. The caller's return address stays where it
// was, above both, and sonde_dlopen_returned returns to it. A debugger or unwinder stopped
// inside that dlopen sees the `ret` as a frame of the caller's object. dlmopen is the same.
#if defined(__x86_64__)
// The real function, and where it must return to (nullptr: straight back to the caller).
struct DlopenPlan {
  void* real;
  const void* ret;
};

extern "C" __attribute__((visibility("hidden"), used)) DlopenPlan sonde_dlopen_target(
    const char* file, int flags, long, const void* caller) {
  static sonde::RealSymbol real{"dlopen"};
  if ((flags & RTLD_DEEPBIND) != 0) sonde::note_deepbind(file);
  sonde::library_opening(file, flags);
  return {real.get(), sonde::dlopen_return_gadget(caller)};
}

extern "C" __attribute__((visibility("hidden"), used)) DlopenPlan sonde_dlmopen_target(
    Lmid_t namespace_id, const char*, int, const void* caller) {
  static sonde::RealSymbol real{"dlmopen"};
  // Objects of another namespace call their own copy of libc, past sonde: never rebound.
  bool base = namespace_id == LM_ID_BASE;
  return {real.get(), base ? sonde::dlopen_return_gadget(caller) : nullptr};
}

extern "C" __attribute__((visibility("hidden"), used)) void sonde_dlopen_done(void* handle) {
  int saved = errno;
  sonde::library_opened(handle);
  errno = saved;
}

// NAME(a, b, c) calls TARGET(a, b, c, return address), which returns the plan in rax and rdx:
// three pushes keep the stack aligned, and rcx is no argument of dlopen's or dlmopen's.
asm(R"(
    .macro SONDE_DLOPEN_STUB name, target
    .text
    .globl \name
    .type \name, @function
\name:
    .cfi_startproc
    push %rdi
    .cfi_adjust_cfa_offset 8
    push %rsi
    .cfi_adjust_cfa_offset 8
    push %rdx
    .cfi_adjust_cfa_offset 8
    mov 24(%rsp), %rcx
    call \target
    mov %rdx, %r11
    pop %rdx
    .cfi_adjust_cfa_offset -8
    pop %rsi
    .cfi_adjust_cfa_offset -8
    pop %rdi
    .cfi_adjust_cfa_offset -8
    test %r11, %r11
    jnz 1f
    jmp *%rax
1:
    sub $16, %rsp
    .cfi_adjust_cfa_offset 16
    mov %r11, (%rsp)
    lea sonde_dlopen_returned(%rip), %r11
    mov %r11, 8(%rsp)
    jmp *%rax
    .cfi_endproc
    .size \name, .-\name
    .endm

    SONDE_DLOPEN_STUB dlopen, sonde_dlopen_target
    SONDE_DLOPEN_STUB dlmopen, sonde_dlmopen_target
)");

// Reached through the `ret` in the caller's object with the stack as the caller left it at its
// call (its return address on top) and dlopen's result in rax.
asm(R"(
    .text
    .type sonde_dlopen_returned, @function
sonde_dlopen_returned:
    .cfi_startproc
    push %rax
    .cfi_adjust_cfa_offset 8
    mov %rax, %rdi
    call sonde_dlopen_done
    pop %rax
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size sonde_dlopen_returned, .-sonde_dlopen_returned
)");
#endif
