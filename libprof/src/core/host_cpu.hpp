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

}  // namespace sonde
