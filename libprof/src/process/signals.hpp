// Signals under sonde behave as without it. For every signal whose default action ends the
// process, sonde's handler sits in the kernel underneath the host's: a host that asks
// (sigaction, signal, Python's signal.getsignal) sees the disposition it installed, or the
// default; when the signal comes, sonde runs the host's handler, or, where the host left the
// default, flushes the profile and dies of the same signal.
#pragma once

#include <linux/filter.h>
#include <signal.h>
#include <sys/types.h>

#include <vector>

namespace sonde {

// What a terminating signal with the default action does before the process dies of it: the
// profile's flush, for the process `self` (a vfork child runs in its parent's memory, and
// must not flush the parent's profile: the runtime compares it with its own pid).
using SignalFlush = void (*)(int sig, pid_t self);

// Takes over the terminating signals: each keeps the disposition it has now as the host's.
// Signals the host ignores stay ignored in the kernel (so they are ignored across exec too).
// `flush` (the runtime's; none in a test of the handlers alone) runs before a default death.
void install_signal_handlers(SignalFlush flush = nullptr);
// Sets the kernel's action for `sig` again from the host's (the sampler's signal, once chosen).
void reinstall_signal_handler(int sig);

// sigaction as the host sees it; the wrappers of sigaction, signal and their relatives call it.
// Before install_signal_handlers, for signals sonde leaves alone, and in a vfork child (whose
// memory is its parent's), it is the real sigaction.
int host_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

// The host set `sig`'s action past sonde's sigaction (an in-process sonde: CPython calls libc's):
// that action becomes the host's, and sonde's handler goes back underneath it.
void adopt_kernel_action(int sig);

// Called by the abort() wrapper before libc's abort: a host SIGABRT handler that returns would
// otherwise be followed by a death that sonde's handler never sees.
void before_abort();

// Whether a seccomp filter's program lets through every system call sonde's handler makes where
// a signal at its default ends the process (getpid, the reset to the default, the re-raise,
// the unblock), with the arguments it passes them, for each terminating signal it holds.
bool default_death_survives(const std::vector<sock_filter>& program);
// `back`: the kernel gets the host's own default for each terminating signal the host left at
// it, so that such a signal ends the process as without sonde, but without sonde's flush
// (where a filter would make the handler's calls the death instead); a host handler's
// SA_RESETHAND stays the kernel's. `!back`: sonde takes them again (the filter was refused).
void hand_back_default_deaths(bool back);

// The real sigaction of libc, past sonde's wrapper.
int real_sigaction(int sig, const struct sigaction* act, struct sigaction* old);

}  // namespace sonde
