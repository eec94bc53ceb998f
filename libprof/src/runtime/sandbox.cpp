// Seccomp sandboxes the host enters (wrappers/process/sandbox_wrappers.cpp sees them coming).
// Strict mode leaves a thread no clock and no system call sonde needs: it is not measured from
// then on. A filter may end the process at any system call, and sonde cannot tell which: on a
// filtered thread it makes none of its own (no flush, no file, no thread), and says so while it
// still may, before the filter exists, with a flush that keeps what ran so far.
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <vector>

#include "core/thread_local_state.hpp"
#include "process/sampler.hpp"
#include "process/signals.hpp"
#include "runtime/log.hpp"
#include "runtime/runtime.hpp"
#include "sonde/process_hooks.hpp"

namespace sonde {

constinit thread_local bool t_filtered __attribute__((tls_model("initial-exec"))) = false;

namespace {
// The thread's state while it is in a strict sandbox: kept by the runtime's list (its calls
// before are flushed), out of the probes' reach.
thread_local ThreadState* t_sandboxed = nullptr;

// The host's filter program, copied by the kernel's own checked read of this process: a bad
// pointer is the host's call's EFAULT, not a fault in sonde.
std::optional<std::vector<sock_filter>> read_program(const void* fprog) {
  sock_fprog head{};
  iovec local{&head, sizeof head};
  iovec remote{const_cast<void*>(fprog), sizeof head};
  if (fprog == nullptr ||
      process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != ssize_t(sizeof head))
    return std::nullopt;
  if (head.len == 0 || head.len > BPF_MAXINSNS) return std::nullopt;
  std::vector<sock_filter> program(head.len);
  size_t bytes = program.size() * sizeof(sock_filter);
  local = {program.data(), bytes};
  remote = {head.filter, bytes};
  if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != ssize_t(bytes)) return std::nullopt;
  return program;
}
}  // namespace

void strict_sandbox(bool entered) {
  if (!entered) {
    t_internal = false;
    t_state = t_sandboxed;
    t_sandboxed = nullptr;
    return;
  }
  // Said first: nothing that allocates may run on this thread once it is in the sandbox.
  if (Runtime* rt = Runtime::get())
    rt->add_note("seccomp",
                 "a thread entered a SECCOMP_MODE_STRICT sandbox: its calls from then on are not "
                 "measured (the sandbox allows no clock read and no system call sonde needs)",
                 false);
  // Every probe and wrapper on this thread now finds no state and may not attach one.
  t_internal = true;
  t_sandboxed = t_state;
  t_state = nullptr;
}

bool seccomp_filter_coming(bool every_thread, const void* program) {
  Runtime* rt = Runtime::get();
  return rt != nullptr && rt->filter_coming(every_thread, program);
}

void seccomp_filter_refused(bool every_thread) {
  if (Runtime* rt = Runtime::get()) rt->filter_refused(every_thread);
}

bool thread_filtered() {
  Runtime* rt = Runtime::get();
  return rt != nullptr && rt->filtered();
}

bool Runtime::filter_coming(bool every_thread, const void* program) {
  // A signal at its default goes through sonde's handler, which flushes (not on a filtered
  // thread) and dies of it again: getpid, rt_sigaction, tgkill. Where the filter kills for one
  // of them the host died of SIGSYS instead of its signal; the kernel gets those defaults back.
  // Over a filter sonde checked, its calls are allowed, the new one's program is not read.
  signals_handed_back_now_ = false;
  bool stacked = filtered();
  bool spared = filters_spare_signals_;
  if (!stacked || spared) {
    std::optional<std::vector<sock_filter>> code;
    if (!stacked) code = read_program(program);
    if (!code || !default_death_survives(*code)) {
      filters_spare_signals_ = false;
      signals_handed_back_now_ = spared && !stacked;  // undone if the call is refused
      hand_back_default_deaths(true);
    }
  }
  // A filter over a filter: the first one may already kill for whatever would be done here.
  if (stacked || !store_ok_) return false;
  auto tid = long(syscall(SYS_gettid));
  // This thread's sampling timer goes while it may (a timer's signal costs no system call on
  // the other threads, whose timers stay under TSYNC).
  if (t_state != nullptr) {
    sampler_disarm(*t_state);
    t_state->read_name();  // as it ends, /proc may be out of its reach
  }
  double at_s = double(monotonic_ns() - clock_.mono0()) / 1e9;
  std::string where = every_thread ? std::string("every thread (SECCOMP_FILTER_FLAG_TSYNC)")
                                   : fmt::format("thread {}", tid);
  std::string consequence =
      every_thread
          ? "so it makes none from then on: the profile ends there, without a final flush"
          : "so it makes none on that thread from then on, nor on the threads it starts (which "
            "are not measured); the thread's calls after it are written by a flush from another "
            "thread (a periodic one, or the process's end there), and if the process ends on a "
            "filtered thread it has no final flush: its figures are as of its last flush";
  if (counters_ != nullptr)
    consequence += every_thread ? "; counters (SONDE_COUNTERS) stop there on every thread"
                                : "; the thread's counters (SONDE_COUNTERS) stop there";
  if (signals_handed_back_now_)
    consequence +=
        "; the filter refuses a system call sonde's signal handler makes to end the process "
        "(getpid, gettid, rt_sigaction, rt_sigprocmask or tgkill), so a signal the program "
        "leaves at its default ends it from then on as without sonde, with no flush";
  // Its own topic: readers say no more of the missing final flush (profile/run_summary.cpp).
  add_note("seccomp-filter",
           fmt::format("a seccomp filter was installed on {}, {:.3f} s after the process "
                       "started: sonde cannot know which system calls it kills for, {}",
                       where, at_s, consequence),
           false);
  flush(FlushKind::kExplicit);
  // Each counter read is a system call too: the figures stay as this flush wrote them.
  if (t_state != nullptr) t_state->counters_frozen = true;
  // Every thread includes sonde's: it ends now, rather than die of a system call later.
  if (every_thread) stop_flusher();
  // The other threads' counters stop at their next read, as TSYNC covers them too.
  if (every_thread) g_counters_halted.store(true);
  // On stderr now: later, the write may be what kills.
  warn("a seccomp filter on {}: the profile keeps what ran before it{}", where,
       every_thread ? "; nothing after it is written"
                    : "; if the process ends on a filtered thread, what ran after it is lost");
  t_filtered = true;
  if (every_thread) filtered_all_.store(true);
  return true;
}

bool Runtime::unseen_filter() {
  // One system call a flush, which a filter may forbid too; without asking, the flush's open of
  // the profile was the host's death (SIGSYS) wherever a filter forbids opening files.
  if (prctl(PR_GET_SECCOMP, 0, 0, 0, 0) != SECCOMP_MODE_FILTER) return false;
  t_filtered = true;
  warn(
      "this thread runs under a seccomp filter sonde did not see installed: it writes nothing "
      "from it, and the calls since the last flush are lost if the process ends on it");
  return true;
}

void Runtime::filter_refused(bool every_thread) {
  int why = errno;  // the call's
  if (signals_handed_back_now_.exchange(false)) {
    filters_spare_signals_ = true;
    hand_back_default_deaths(false);
  }
  t_filtered = false;
  filtered_all_.store(false);
  g_counters_halted.store(false);  // the counts the others missed meanwhile stay missed
  if (t_state != nullptr) t_state->counters_frozen = false;
  if (every_thread && !flusher_running_.load()) start_flusher();
  if (t_state != nullptr) sampler_arm(*t_state);
  // Said as the filter was, on stderr and in the file (which has the first note already).
  add_note("seccomp", fmt::format("the seccomp filter said above was refused ({}): it was not "
                                  "installed, and sonde went on as before",
                                  std::strerror(why)));
}

}  // namespace sonde
