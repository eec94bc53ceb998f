// The two kinds of seccomp sandbox a host may enter, through prctl(PR_SET_SECCOMP) or the
// seccomp system call (glibc has no function for it: libseccomp and others use syscall()).
//
// SECCOMP_MODE_STRICT leaves the calling thread read, write, exit and sigreturn, and makes
// rdtsc fault: a measured call on it after that died (SIGSEGV from sonde's clock, then SIGKILL
// from the handler's first system call). sonde stops measuring on a thread before it enters the
// sandbox; the sandbox's usual end, a raw SYS_exit, is runtime_flush.cpp's.
//
// A filter (SECCOMP_MODE_FILTER) may end the process at any system call: one that kills at
// open made the exit flush's open of the profile a SIGSYS, and the host lost its stdout. sonde
// flushes once before the filter exists and makes no more system calls of its own on a
// filtered thread (runtime/sandbox.cpp).
#include <errno.h>
#include <linux/prctl.h>  // not sys/prctl.h: its variadic prototype is not this definition's
#include <linux/seccomp.h>
#include <stdarg.h>
#include <sys/syscall.h>

#include "../intercept.hpp"
#include "sonde/process_hooks.hpp"

namespace {
::sonde::RealSymbol g_prctl{"prctl"};
::sonde::RealSymbol g_syscall{"syscall"};

// Resolved as the library loads: syscall() may first be called from a signal handler.
__attribute__((constructor(102))) void resolve_sandbox_calls() {
  g_prctl.get();
  g_syscall.get();
}

// What a call to enter a sandbox asks for. A filter without a program is no filter: it is how
// programs ask whether seccomp is there at all (the kernel answers EFAULT).
enum class Sandbox { kNone, kStrict, kFilter, kFilterEveryThread };

Sandbox asked_by_prctl(int option, unsigned long mode, unsigned long program) {
  if (option != PR_SET_SECCOMP) return Sandbox::kNone;
  if (mode == SECCOMP_MODE_STRICT) return Sandbox::kStrict;
  return mode == SECCOMP_MODE_FILTER && program != 0 ? Sandbox::kFilter : Sandbox::kNone;
}

Sandbox asked_by_seccomp(unsigned long operation, unsigned long flags, unsigned long program) {
  if (operation == SECCOMP_SET_MODE_STRICT) return Sandbox::kStrict;
  if (operation != SECCOMP_SET_MODE_FILTER || program == 0) return Sandbox::kNone;
  return (flags & SECCOMP_FILTER_FLAG_TSYNC) != 0 ? Sandbox::kFilterEveryThread : Sandbox::kFilter;
}

// Tells sonde before the call and, when the call failed, after it; errno is the call's. A call
// succeeds with 0, or with a descriptor where a filter's notifications were asked for
// (`returns_fd`); a SECCOMP_FILTER_FLAG_TSYNC that fails returns the thread that would not
// follow.
template <class Call>
long entering(Sandbox sandbox, unsigned long program, bool returns_fd, Call&& call) {
  bool every = sandbox == Sandbox::kFilterEveryThread;
  bool strict = sandbox == Sandbox::kStrict;
  bool told = true;
  if (strict)
    sonde::strict_sandbox(true);
  else
    told = sonde::seccomp_filter_coming(every, reinterpret_cast<const void*>(program));
  long rc = call();
  if (told && (rc < 0 || (rc > 0 && !returns_fd))) {
    int saved = errno;
    if (strict)
      sonde::strict_sandbox(false);
    else
      sonde::seccomp_filter_refused(every);
    errno = saved;
  }
  return rc;
}

}  // namespace

// glibc's prctl reads five machine words whatever the option: so does this one.
SONDE_EXPORT_C int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4,
                         unsigned long a5) {
  using Fn = int (*)(int, unsigned long, unsigned long, unsigned long, unsigned long);
  auto real = reinterpret_cast<Fn>(g_prctl.get());
  Sandbox sandbox = asked_by_prctl(option, a2, a3);
  if (sandbox == Sandbox::kNone) return real(option, a2, a3, a4, a5);
  return int(entering(sandbox, a3, false, [&] { return long(real(option, a2, a3, a4, a5)); }));
}

// glibc's syscall passes six machine words on whatever the number: so does this one.
SONDE_EXPORT_C long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  unsigned long a[6];
  for (unsigned long& word : a) word = va_arg(ap, unsigned long);
  va_end(ap);
  using Fn = long (*)(long, ...);
  auto real = reinterpret_cast<Fn>(g_syscall.get());
  Sandbox sandbox = number == SYS_seccomp ? asked_by_seccomp(a[0], a[1], a[2]) : Sandbox::kNone;
  if (sandbox == Sandbox::kNone) return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
  bool listener = (a[1] & SECCOMP_FILTER_FLAG_NEW_LISTENER) != 0;
  return entering(sandbox, a[2], listener,
                  [&] { return real(number, a[0], a[1], a[2], a[3], a[4], a[5]); });
}
