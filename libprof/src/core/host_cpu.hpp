// The host's busy CPU time, from /proc/stat: what the CPUs this process may run on (its
// affinity mask as at its start: a batch job's cpuset, OMP_PROC_BIND's binding) spent outside
// idle and iowait (user, nice, system, irq, softirq, and steal: on a VM, time the hypervisor gave
// to others), in seconds since boot. Two readings bracket a run: what those CPUs did meanwhile,
// the run's own threads included; the thread advice takes the run's own out to see the others'.
// Summed over the whole host, a job pinned to 4 of 64 CPUs read the other jobs' load as its own
// cores' (a review's case).
#pragma once

#include <sched.h>

#include <optional>

namespace sonde {

std::optional<double> host_busy_cpu_s(const cpu_set_t& cpus);

// The time thread `tid` of this process has stood runnable, waiting for a CPU that other threads
// held, since it was made (/proc/self/task/TID/schedstat's second field, ns). With its CPU time
// and its life, it tells a thread off its core for want of one from one blocked in I/O, a sleep
// or a lock: the data-loading advice's question of a loop on a busy host.
std::optional<double> thread_runq_wait_s(pid_t tid);

}  // namespace sonde
