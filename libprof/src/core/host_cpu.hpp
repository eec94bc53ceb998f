// The host's busy CPU time, from /proc/stat's first line: what every CPU spent outside idle and
// iowait (user, nice, system, irq, softirq, and steal: on a VM, time the hypervisor gave to
// others), in seconds since boot. Two readings bracket a run: what the host did meanwhile, the
// run's own threads included; the thread advice takes the run's own out to see the others'.
#pragma once

#include <optional>

namespace sonde {

std::optional<double> host_busy_cpu_s();

}  // namespace sonde
