// prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT) leaves the calling thread read, write, exit and
// sigreturn, and makes rdtsc fault: a measured call on it after that died (SIGSEGV from sonde's
// clock, then SIGKILL from the handler's first system call). sonde stops measuring on a thread
// before it enters the sandbox; the sandbox's usual end, a raw SYS_exit, is runtime_flush.cpp's.
#include <errno.h>
#include <linux/prctl.h>  // not sys/prctl.h: its variadic prototype is not this definition's
#include <linux/seccomp.h>

#include "../intercept.hpp"
#include "sonde/process_hooks.hpp"

namespace {
::sonde::RealSymbol g_prctl{"prctl"};
}  // namespace

// glibc's prctl reads five machine words whatever the option: so does this one.
SONDE_EXPORT_C int prctl(int option, unsigned long a2, unsigned long a3, unsigned long a4,
                         unsigned long a5) {
  using Fn = int (*)(int, unsigned long, unsigned long, unsigned long, unsigned long);
  auto real = reinterpret_cast<Fn>(g_prctl.get());
  bool strict = option == PR_SET_SECCOMP && a2 == SECCOMP_MODE_STRICT;
  if (!strict) return real(option, a2, a3, a4, a5);
  sonde::strict_sandbox(true);
  int rc = real(option, a2, a3, a4, a5);
  if (rc != 0) {
    int saved = errno;
    sonde::strict_sandbox(false);
    errno = saved;
  }
  return rc;
}
