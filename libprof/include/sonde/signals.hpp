// What libsonde.so and `sonde run` agree on about signals.
#pragma once

#include <signal.h>

#include <cstdint>

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

// `sonde run` passes a signal on with sigqueue and a value holding this mark (its high 32 bits)
// and the pid of the process that sent the signal to sonde run (its low 32). When the same
// signal was sent to the whole process group (systemd, SLURM, kill -TERM -PGID), the command
// gets it twice, from the sender and from sonde run: libsonde lets the host's handler see it
// once. Only a copy of the same sender's is the second of a pair: a program that re-raises a
// signal on itself after its clean-up (kill(getpid(), sig), CPython's exit on ^C, a shell's
// `trap ... kill -TERM $$`) or another process's signal is a signal of its own (passed a
// SIGTERM through sonde run, a red team's program re-raised it and ran on).
inline constexpr uint32_t kForwardedSignalMark = 0x50de5160;

inline sigval forwarded_signal_value(pid_t sender) {
  sigval v{};
  v.sival_ptr = reinterpret_cast<void*>(uintptr_t(kForwardedSignalMark) << 32 | uint32_t(sender));
  return v;
}

// True where `v` is sonde run's (forwarded_signal_value), with the original sender in `sender`.
inline bool forwarded_signal_sender(sigval v, pid_t& sender) {
  auto word = uint64_t(reinterpret_cast<uintptr_t>(v.sival_ptr));
  if (word >> 32 != kForwardedSignalMark) return false;
  sender = pid_t(uint32_t(word));
  return true;
}

}  // namespace sonde
