// What libsonde.so and `sonde run` agree on about signals.
#pragma once

#include <signal.h>

namespace sonde {

// Every signal whose default action ends the process (SIGKILL and SIGSTOP aside, which cannot
// be caught): libsonde flushes before such a death, and `sonde run` passes these on.
inline bool terminates_by_default(int sig) {
  switch (sig) {
    case SIGHUP: case SIGINT: case SIGQUIT: case SIGILL: case SIGTRAP: case SIGABRT:
    case SIGBUS: case SIGFPE: case SIGUSR1: case SIGSEGV: case SIGUSR2: case SIGPIPE:
    case SIGALRM: case SIGTERM: case SIGSTKFLT: case SIGXCPU: case SIGXFSZ: case SIGVTALRM:
    case SIGPROF: case SIGIO: case SIGPWR: case SIGSYS:
      return true;
    default:
      return sig >= SIGRTMIN && sig <= SIGRTMAX;
  }
}

// `sonde run` passes a signal on with sigqueue and this value. When the same signal was sent
// to the whole process group (systemd, SLURM, kill -TERM -PGID), the command gets it twice, from
// the sender and from sonde run: libsonde lets the host's handler see it once.
inline constexpr int kForwardedSignalMark = 0x50de5160;

}  // namespace sonde
