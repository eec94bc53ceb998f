// Every libc entry that sets or reads a signal's disposition goes through host_sigaction, so a
// host sees the dispositions it installed (libprof/src/process/signals.hpp), never sonde's.
// glibc's signal(), sysv_signal() and sigset() call sigaction inside libc, where LD_PRELOAD
// cannot reach, so they are written out here with glibc's semantics.
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>

#include <atomic>
#include <cstdint>

#include "../intercept.hpp"
#include "process/signals.hpp"

namespace {

// Which signals siginterrupt() asked to interrupt system calls: signal() then installs its
// handler without SA_RESTART (glibc keeps this set internally).
std::atomic<uint64_t> g_interrupting{0};

uint64_t bit(int sig) { return sig > 0 && sig < 65 ? uint64_t{1} << (sig - 1) : 0; }

sighandler_t install(int sig, sighandler_t handler, int flags, bool mask_self) {
  if (handler == SIG_ERR || sig <= 0 || sig >= 65) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction act {
  }, old{};
  act.sa_handler = handler;
  act.sa_flags = flags;
  sigemptyset(&act.sa_mask);
  if (mask_self && sigaddset(&act.sa_mask, sig) < 0) return SIG_ERR;
  if (sonde::host_sigaction(sig, &act, &old) < 0) return SIG_ERR;
  return old.sa_handler;
}

sighandler_t bsd_install(int sig, sighandler_t handler) {
  int flags = (g_interrupting.load(std::memory_order_relaxed) & bit(sig)) != 0 ? 0 : SA_RESTART;
  return install(sig, handler, flags, true);
}

sighandler_t sysv_install(int sig, sighandler_t handler) {
  return install(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

}  // namespace

SONDE_EXPORT_C int sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return sonde::host_sigaction(sig, act, old);
}

SONDE_EXPORT_C int __sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  return sonde::host_sigaction(sig, act, old);
}

SONDE_EXPORT_C sighandler_t signal(int sig, sighandler_t handler) {
  return bsd_install(sig, handler);
}

SONDE_EXPORT_C sighandler_t bsd_signal(int sig, sighandler_t handler) {
  return bsd_install(sig, handler);
}

SONDE_EXPORT_C sighandler_t ssignal(int sig, sighandler_t handler) {
  return bsd_install(sig, handler);
}

SONDE_EXPORT_C sighandler_t sysv_signal(int sig, sighandler_t handler) {
  return sysv_install(sig, handler);
}

SONDE_EXPORT_C sighandler_t __sysv_signal(int sig, sighandler_t handler) {
  return sysv_install(sig, handler);
}

SONDE_EXPORT_C int siginterrupt(int sig, int interrupt) {
  struct sigaction act;
  if (bit(sig) == 0 || sonde::host_sigaction(sig, nullptr, &act) < 0) {
    errno = EINVAL;
    return -1;
  }
  if (interrupt != 0) {
    g_interrupting.fetch_or(bit(sig), std::memory_order_relaxed);
    act.sa_flags &= ~SA_RESTART;
  } else {
    g_interrupting.fetch_and(~bit(sig), std::memory_order_relaxed);
    act.sa_flags |= SA_RESTART;
  }
  return sonde::host_sigaction(sig, &act, nullptr);
}

SONDE_EXPORT_C int sigignore(int sig) {
  struct sigaction act {};
  act.sa_handler = SIG_IGN;
  sigemptyset(&act.sa_mask);
  return sonde::host_sigaction(sig, &act, nullptr);
}

// System V: SIG_HOLD blocks the signal; anything else installs and unblocks it. Either returns
// SIG_HOLD when the signal was blocked before.
SONDE_EXPORT_C sighandler_t sigset(int sig, sighandler_t disposition) {
  sigset_t one, before;
  sigemptyset(&one);
  if (bit(sig) == 0 || sigaddset(&one, sig) < 0) {
    errno = EINVAL;
    return SIG_ERR;
  }
  struct sigaction old {};
  if (disposition == SIG_HOLD) {
    if (sigprocmask(SIG_BLOCK, &one, &before) < 0) return SIG_ERR;
    if (sigismember(&before, sig)) return SIG_HOLD;
    if (sonde::host_sigaction(sig, nullptr, &old) < 0) return SIG_ERR;
    return old.sa_handler;
  }
  struct sigaction act {};
  act.sa_handler = disposition;
  sigemptyset(&act.sa_mask);
  if (sonde::host_sigaction(sig, &act, &old) < 0) return SIG_ERR;
  if (sigprocmask(SIG_UNBLOCK, &one, &before) < 0) return SIG_ERR;
  return sigismember(&before, sig) ? SIG_HOLD : old.sa_handler;
}

// Resolved at load: abort runs where the heap may be broken, and dlsym may allocate.
sonde::RealSymbol g_real_abort{"abort"};
__attribute__((constructor(102))) void resolve_abort() { g_real_abort.get(); }

// glibc's abort, once a host SIGABRT handler returns, resets SIGABRT to its default inside libc
// and raises it again: that death would pass sonde by, so sonde does the first step itself.
SONDE_EXPORT_C __attribute__((noreturn)) void abort() noexcept {
  sonde::before_abort();
  reinterpret_cast<void (*)()>(g_real_abort.get())();
  __builtin_unreachable();
}
