#include "process/signals.hpp"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <initializer_list>

#include "process/sampler.hpp"
#include "process/seccomp_program.hpp"
#include "sonde/process_hooks.hpp"
#include "sonde/signals.hpp"

namespace sonde {

namespace {

constexpr int kSignalLimit = 65;  // _NSIG on Linux: signals 1..64

// The host's disposition of one signal sonde took over. `handler` and `flags` are what the
// signal handler reads, without a lock, under the table's sequence count; `action` is the
// whole structure a query returns, read and written under the lock.
struct HostDisposition {
  std::atomic<uintptr_t> handler{0};
  std::atomic<int> flags{0};
  struct sigaction action {};
};

struct Table {
  std::atomic<bool> managed[kSignalLimit]{};
  HostDisposition host[kSignalLimit];
  std::atomic<uint32_t> seq{0};
  std::atomic_flag lock = ATOMIC_FLAG_INIT;
  std::atomic<pid_t> owner{0};  // the process the table describes (a vfork child shares it)
  sigset_t fork_saved{};
  bool fork_masked = false;  // whether fork_prepare blocked the forking thread's signals
};

// Constant-initialised: wrappers may be called before any constructor has run.
constinit Table g_table;

using SigactionFn = int (*)(int, const struct sigaction*, struct sigaction*);
constinit std::atomic<SigactionFn> g_real{nullptr};
constinit std::atomic<SignalFlush> g_flush{nullptr};  // install_signal_handlers' flush
// Set while a seccomp filter would kill for a call of the default death's (below): the kernel
// then holds the host's own default, and SA_RESETHAND, for every signal but the sampler's.
constinit std::atomic<bool> g_defaults_handed_back{false};

uintptr_t handler_of(const struct sigaction& a) {
  return (a.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<uintptr_t>(a.sa_sigaction)
                                        : reinterpret_cast<uintptr_t>(a.sa_handler);
}

const uintptr_t kDefault = reinterpret_cast<uintptr_t>(SIG_DFL);
const uintptr_t kIgnore = reinterpret_cast<uintptr_t>(SIG_IGN);

// Writers hold it for a few instructions, but a fork holds it while the runtime's fork handlers
// wait for a flush: past a short spin, waiters give the core away.
void lock_table() {
  for (int spins = 0; g_table.lock.test_and_set(std::memory_order_acquire); ++spins) {
    if (spins < 100) {
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    } else {
      sched_yield();
    }
  }
}

// Held with every signal blocked on this thread: a handler that interrupted the holder and
// then waited for the lock would wait forever. Signal handlers take it too.
// On a thread under a seccomp filter sonde makes no system call (runtime/sandbox.cpp), and the
// mask is one: there the table is changed with the thread's signals open.
class TableLock {
 public:
  TableLock() : masked_(!thread_filtered()) {
    sigset_t all;
    sigfillset(&all);
    if (masked_) pthread_sigmask(SIG_BLOCK, &all, &saved_);
    lock_table();
  }
  ~TableLock() {
    g_table.lock.clear(std::memory_order_release);
    if (masked_) pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  TableLock(const TableLock&) = delete;
  TableLock& operator=(const TableLock&) = delete;

 private:
  bool masked_;
  sigset_t saved_;
};

// Whether this process owns the table, not a vfork child running in its memory. A filtered
// thread does not ask (getpid is a system call the filter may kill for): it is taken for the
// owner's, as a vfork child under a filter is rare and one under sonde's handler rarer.
bool owns_table() {
  return thread_filtered() || getpid() == g_table.owner.load(std::memory_order_relaxed);
}

void store_host(int sig, const struct sigaction& a) {  // under TableLock
  HostDisposition& d = g_table.host[sig];
  g_table.seq.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  d.action = a;
  d.handler.store(handler_of(a), std::memory_order_relaxed);
  d.flags.store(a.sa_flags, std::memory_order_relaxed);
  g_table.seq.fetch_add(1, std::memory_order_release);
}

struct HostView {
  uintptr_t handler;
  int flags;
};

// Lock-free: a writer holds the lock with its signals blocked, so it is never this thread.
HostView load_host(int sig) {
  const HostDisposition& d = g_table.host[sig];
  for (;;) {
    uint32_t before = g_table.seq.load(std::memory_order_acquire);
    if ((before & 1) == 0) {
      HostView v{d.handler.load(std::memory_order_relaxed),
                 d.flags.load(std::memory_order_relaxed)};
      std::atomic_thread_fence(std::memory_order_acquire);
      if (g_table.seq.load(std::memory_order_relaxed) == before) return v;
    }
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

void on_signal(int sig, siginfo_t* info, void* context);

// The last delivery of each signal sent by a process, and of each that `sonde run` passed on:
// when and from whom, in one word (a delivery, below), so that a handler on another thread
// never reads one's time with another's sender.
struct Deliveries {
  std::atomic<uint64_t> direct{0};
  std::atomic<uint64_t> forwarded{0};
};
constinit Deliveries g_deliveries[kSignalLimit];
// The copy comes a scheduling delay after the original, milliseconds on a loaded machine.
constexpr int64_t kPairWindowNs = 1'000'000'000;

// A delivery's word: the monotonic clock in units of 2^20 ns (about 1 ms; 2^42 of them last
// 146 years) above the sender's pid (22 bits: Linux's PID_MAX_LIMIT is 2^22). Never 0.
constexpr int kPidBits = 22;
uint64_t delivery(int64_t now_ns, pid_t sender) {
  return (uint64_t(now_ns) >> 20) << kPidBits | (uint32_t(sender) & ((1u << kPidBits) - 1));
}

int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// True for the second delivery of a signal that came both from its sender and through
// `sonde run` (sonde/signals.hpp): the host saw the first one already. A copy that passes reads
// as the kill() from sonde run that it is.
bool second_of_a_pair(int sig, siginfo_t* info) {
  // Only kill() and sigqueue() make such pairs (not timers, the kernel, or raise()).
  if (info == nullptr || (info->si_code != SI_USER && info->si_code != SI_QUEUE)) return false;
  pid_t sender = info->si_pid;
  bool forwarded = info->si_code == SI_QUEUE && info->si_pid == getppid() &&
                   forwarded_signal_sender(info->si_value, sender);
  Deliveries& d = g_deliveries[sig];
  uint64_t now = delivery(monotonic_ns(), sender);
  uint64_t other = (forwarded ? d.direct : d.forwarded).exchange(0);
  constexpr uint64_t kWindow = uint64_t(kPairWindowNs >> 20) << kPidBits;
  constexpr uint64_t kPid = (uint64_t(1) << kPidBits) - 1;
  // The same sender's, within the window (both words' times in one unit: compared whole).
  if (other != 0 && (other & kPid) == (now & kPid) && now - other < kWindow) return true;
  (forwarded ? d.forwarded : d.direct).store(now);
  if (forwarded) info->si_code = SI_USER;
  return false;
}

// What the kernel holds for a host disposition: sonde's handler, except where the host ignores
// the signal (ignored signals must stay ignored across exec, and never interrupt a call).
struct sigaction kernel_action(int sig, const struct sigaction& host) {
  uintptr_t h = handler_of(host);
  if (h == kIgnore) return host;
  bool handed_back = g_defaults_handed_back.load(std::memory_order_relaxed) &&
                     (sig == 0 || sig != sampler_signal());
  if (h == kDefault && handed_back) return host;
  struct sigaction k {};
  k.sa_sigaction = on_signal;
  if (h == kDefault) {
    // Flush and die: nothing else runs meanwhile, and a stack overflow finds the host's
    // alternate stack where it has one.
    k.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigfillset(&k.sa_mask);
  } else {
    // The host's handler runs with the host's mask and flags; SA_RESETHAND is done by sonde
    // (in the kernel it would reset the disposition past sonde's handler).
    k.sa_flags = (host.sa_flags & ~SA_RESETHAND) | SA_SIGINFO;
    // Handed back, the kernel resets it: the next one is the default's, which sonde no longer
    // takes (on_signal still resets the host's view, as below).
    if (handed_back) k.sa_flags |= host.sa_flags & SA_RESETHAND;
    k.sa_mask = host.sa_mask;
  }
  if (sig != 0 && sig == sampler_signal()) {
    // The sampler's unwinder may fault on a misread frame; the fault must reach sonde's
    // handler, which jumps back into the sampler's. Left out of the mask here, it costs no
    // system call per sample to unblock.
    sigdelset(&k.sa_mask, SIGSEGV);
    sigdelset(&k.sa_mask, SIGBUS);
  }
  return k;
}

// The default action, for real: the process ends as it would have without sonde.
void die_of(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  real_sigaction(sig, &dfl, nullptr);
  raise(sig);  // pending while the handler's mask blocks it; delivered on the unblock
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, sig);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  // Still alive: a fault in the init of a PID namespace, which ignores a raised signal. The
  // default stays: the faulting instruction runs again when the handler returns, and kills.
}

bool is_fault(int sig, const siginfo_t* info) {
  bool synchronous = sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL ||
                     sig == SIGTRAP || sig == SIGSYS;
  return synchronous && info != nullptr && info->si_code > 0;
}

void on_signal(int sig, siginfo_t* info, void* context) {
  int saved_errno = errno;
  if (sampler_owns(sig, info)) {  // the sampler's timer, not the host's: never the host's handler
    sampler_on_signal(info, context);
    errno = saved_errno;
    return;
  }
  if ((sig == SIGSEGV || sig == SIGBUS) && is_fault(sig, info)) sampler_escape_fault();
  HostView v = load_host(sig);
  // The sampler's signal that no thread's state claims (its event closed, or its thread's
  // state gone, while the overflow was on its way; or the descriptor number reused by another
  // thread's event). Where the host left this signal at its default, none of its own uses it:
  // handed on, the default ended the host (pool_spin under the sampler: 4 runs in 40).
  if (sig == sampler_signal() && sig != 0 && v.handler == kDefault) {
    errno = saved_errno;
    return;
  }
  if (v.handler == kIgnore) {  // the host ignored it while it was on its way
    errno = saved_errno;
    return;
  }
  if (v.handler != kDefault) {
    if (second_of_a_pair(sig, info)) {
      errno = saved_errno;
      return;
    }
    // (A vfork child would reset its parent's view: it shares the table.)
    if ((v.flags & SA_RESETHAND) != 0 && owns_table()) {
      TableLock lock;
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      store_host(sig, dfl);
    }
    errno = saved_errno;
    if ((v.flags & SA_SIGINFO) != 0) {
      reinterpret_cast<void (*)(int, siginfo_t*, void*)>(v.handler)(sig, info, context);
    } else {
      reinterpret_cast<void (*)(int)>(v.handler)(sig);
    }
    return;
  }
  // The copy of a pair whose first the host's handler took, arriving once the host is back at
  // the default (CPython restores SIG_DFL as it finalizes, after its handler raised the
  // KeyboardInterrupt a script caught): the host saw this signal already, and the copy would
  // end a process exiting cleanly (a red-team job that saved a checkpoint on SIGTERM and exited
  // 0 read "killed by signal 15" where sonde run's copy came 3-30 ms after the sender's).
  if (second_of_a_pair(sig, info)) {
    errno = saved_errno;
    return;
  }
  pid_t self = getpid();
  // The init of a PID namespace is killed at the default only by a fault of its own: the kernel
  // drops any other signal, so sonde does too, and goes on profiling.
  if (self == 1 && !is_fault(sig, info)) {
    errno = saved_errno;
    return;
  }
  // A vfork child runs in its parent's memory: it must not flush the parent's profile.
  SignalFlush flush = g_flush.load(std::memory_order_acquire);
  if (flush != nullptr && self == g_table.owner.load(std::memory_order_relaxed)) flush(sig, self);
  die_of(sig);
  errno = saved_errno;
}

// A fork in the middle of a change would leave the child's table locked, or half written. A
// filtered thread's fork makes no system call of sonde's: no mask (as TableLock), and its
// child, filtered too, keeps the parent's pid as the owner's (owns_table does not ask).
void fork_prepare() {
  sigset_t all, saved{};
  sigfillset(&all);
  bool masked = !thread_filtered();
  if (masked) pthread_sigmask(SIG_BLOCK, &all, &saved);
  lock_table();
  g_table.fork_masked = masked;
  g_table.fork_saved = saved;
}

void fork_parent() {
  sigset_t saved = g_table.fork_saved;
  g_table.lock.clear(std::memory_order_release);
  if (g_table.fork_masked) pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

void fork_child() {
  if (!g_table.fork_masked) return fork_parent();
  g_table.owner.store(getpid(), std::memory_order_relaxed);
  fork_parent();
}

}  // namespace

int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  SigactionFn fn = g_real.load(std::memory_order_acquire);
  if (fn == nullptr) {
    fn = reinterpret_cast<SigactionFn>(dlsym(RTLD_NEXT, "sigaction"));
    if (fn == nullptr) {
      errno = ENOSYS;
      return -1;
    }
    g_real.store(fn, std::memory_order_release);
  }
  return fn(sig, act, old);
}

int host_sigaction(int sig, const struct sigaction* act, struct sigaction* old) {
  if (sig <= 0 || sig >= kSignalLimit || !g_table.managed[sig].load(std::memory_order_acquire) ||
      !owns_table()) {
    return real_sigaction(sig, act, old);
  }
  struct sigaction wanted {};
  struct sigaction previous {};
  if (act != nullptr) wanted = *act;  // before the lock: a bad pointer faults as in libc
  {
    TableLock lock;
    previous = g_table.host[sig].action;
    if (act != nullptr) {
      struct sigaction k = kernel_action(sig, wanted);
      if (real_sigaction(sig, &k, nullptr) != 0) return -1;
      store_host(sig, wanted);
    }
  }
  if (old != nullptr) *old = previous;
  return 0;
}

void before_abort() {
  static std::atomic<bool> aborting{false};
  if (!g_table.managed[SIGABRT].load(std::memory_order_acquire) ||
      getpid() != g_table.owner.load(std::memory_order_relaxed) || aborting.exchange(true)) {
    return;  // a second abort (from the handler) goes straight to libc's, as in libc
  }
  // What libc's abort does first: the host's handler runs, or the default flushes and dies.
  sigset_t only;
  sigemptyset(&only);
  sigaddset(&only, SIGABRT);
  pthread_sigmask(SIG_UNBLOCK, &only, nullptr);
  raise(SIGABRT);
  // The handler returned, or SIGABRT is ignored: libc resets it to the default where sonde
  // cannot see and dies of it. The flush comes first.
  if (SignalFlush flush = g_flush.load(std::memory_order_acquire)) flush(SIGABRT, getpid());
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  host_sigaction(SIGABRT, &dfl, nullptr);
}

void reinstall_signal_handler(int sig) {
  if (sig <= 0 || sig >= kSignalLimit || !g_table.managed[sig].load(std::memory_order_acquire)) {
    return;
  }
  TableLock lock;
  const struct sigaction& host = g_table.host[sig].action;
  if (handler_of(host) == kIgnore) return;
  struct sigaction k = kernel_action(sig, host);
  real_sigaction(sig, &k, nullptr);
}

void adopt_kernel_action(int sig) {
  if (sig <= 0 || sig >= kSignalLimit || !g_table.managed[sig].load(std::memory_order_acquire) ||
      getpid() != g_table.owner.load(std::memory_order_relaxed)) {
    return;
  }
  struct sigaction now {};
  if (real_sigaction(sig, nullptr, &now) != 0) return;
  if ((now.sa_flags & SA_SIGINFO) != 0 && now.sa_sigaction == on_signal) return;  // sonde's still
  host_sigaction(sig, &now, nullptr);
}

bool default_death_survives(const std::vector<sock_filter>& program) {
  seccomp_data call{};
  call.arch = seccomp_native_arch();
  if (call.arch == 0) return false;
  auto pid = uint64_t(getpid());
  auto tid = uint64_t(syscall(SYS_gettid));
  sigset_t set;
  sigfillset(&set);
  auto pointer = uint64_t(reinterpret_cast<uintptr_t>(&set));
  auto allows = [&](long nr, std::initializer_list<uint64_t> args) {
    call.nr = int(nr);
    std::fill(std::begin(call.args), std::end(call.args), 0);
    std::copy(args.begin(), args.end(), call.args);
    return seccomp_allows(program, call);
  };
  // on_signal's getpid; die_of's reset, raise (glibc: block all, gettid, getpid, tgkill, mask
  // back) and unblock: each with the arguments it passes.
  bool ok = allows(SYS_getpid, {}) && allows(SYS_gettid, {}) &&
            allows(SYS_rt_sigprocmask, {SIG_BLOCK, pointer, pointer, 8}) &&
            allows(SYS_rt_sigprocmask, {SIG_SETMASK, pointer, 0, 8}) &&
            allows(SYS_rt_sigprocmask, {SIG_UNBLOCK, pointer, 0, 8});
  for (int sig = 1; ok && sig < kSignalLimit; ++sig) {
    if (!g_table.managed[sig].load(std::memory_order_acquire)) continue;
    if (handler_of(g_table.host[sig].action) == kIgnore) continue;
    ok = allows(SYS_rt_sigaction, {uint64_t(sig), pointer, 0, 8}) &&
         allows(SYS_tgkill, {pid, tid, uint64_t(sig)});
  }
  return ok;
}

void hand_back_default_deaths(bool back) {
  if (g_defaults_handed_back.exchange(back) == back) return;
  for (int sig = 1; sig < kSignalLimit; ++sig) reinstall_signal_handler(sig);
}

void install_signal_handlers(SignalFlush flush) {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  g_flush.store(flush, std::memory_order_release);
  g_table.owner.store(getpid(), std::memory_order_relaxed);
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  for (int sig = 1; sig < kSignalLimit; ++sig) {
    if (!terminates_by_default(sig)) continue;
    TableLock lock;
    struct sigaction current {};
    if (real_sigaction(sig, nullptr, &current) != 0) continue;
    store_host(sig, current);
    if (handler_of(current) != kIgnore) {
      struct sigaction k = kernel_action(sig, current);
      if (real_sigaction(sig, &k, nullptr) != 0) continue;
    }
    g_table.managed[sig].store(true, std::memory_order_release);
  }
}

}  // namespace sonde
