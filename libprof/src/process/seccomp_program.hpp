// A seccomp filter's answer for one system call, found by running its classic-BPF program as the
// kernel does (the subset kernel/seccomp.c accepts, over struct seccomp_data). sonde asks it
// before a filter it sees go in: whether the calls its own signal path makes would survive it.
#pragma once

#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace sonde {

// The program's return value for `call`, or nothing where the program is not one the kernel
// would have accepted (empty, too long, a jump out of it, an instruction outside the subset, a
// load outside seccomp_data) or runs off its end.
std::optional<uint32_t> seccomp_verdict(const std::vector<sock_filter>& program,
                                        const seccomp_data& call);

// Whether the call goes through: the action is SECCOMP_RET_ALLOW or _LOG. Every other action
// (kill, trap, an errno, a tracer or a listener asked) fails or ends the call, and so does a
// program the kernel would not have run.
bool seccomp_allows(const std::vector<sock_filter>& program, const seccomp_data& call);

// The audit architecture the kernel puts in seccomp_data.arch for this build's system calls
// (0 where this file does not know it: then no call is taken as allowed).
uint32_t seccomp_native_arch();

}  // namespace sonde
