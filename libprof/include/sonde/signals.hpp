// What libsonde.so and `sonde run` agree on about signals.
#pragma once

#include <signal.h>

namespace sonde {

// Every signal whose default action ends the process (SIGKILL and SIGSTOP aside, which cannot
// be caught): libsonde flushes before such a death, and `sonde run` passes these on.
inline constexpr int kTerminatingSignals[] = {
    SIGHUP,  SIGINT,    SIGQUIT, SIGILL,  SIGTRAP, SIGABRT, SIGBUS,    SIGFPE,
    SIGUSR1, SIGSEGV,   SIGUSR2, SIGPIPE, SIGALRM, SIGTERM, SIGSTKFLT, SIGXCPU,
    SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO,   SIGPWR,  SIGSYS};

inline bool terminates_by_default(int sig) {
  for (int s : kTerminatingSignals) {
    if (s == sig) return true;
  }
  return sig >= SIGRTMIN && sig <= SIGRTMAX;  // glibc's SIGRTMIN is known at run time only
}

// `sonde run` passes a signal on with sigqueue and this value. When the same signal was sent
// to the whole process group (systemd, SLURM, kill -TERM -PGID), the command gets it twice, from
// the sender and from sonde run: libsonde lets the host's handler see it once.
inline constexpr int kForwardedSignalMark = 0x50de5160;

}  // namespace sonde
