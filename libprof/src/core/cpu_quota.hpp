// The CPU quota of the process's cgroup (a container's `--cpus`, a Kubernetes pod's CPU limit, a
// systemd unit's CPUQuota): CFS lets the cgroup's threads run `quota` microseconds of every
// `period`, whatever the CPUs its affinity mask names, and stops them all until the next period
// once they are spent (throttling). A pod limited to 4 CPUs on a 64-core node sees 64 CPUs in
// its mask; torch and OpenBLAS start 64 threads there, and sonde's thread advice read 64
// available cores. Read once, with the cgroup's throttling counters as a baseline; read again at
// each flush for what the run was throttled.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sonde {

struct CpuQuota {
  double cores = 0;  // quota / period, the smallest along the cgroup's ancestors
  std::string dir;   // the cgroup folder whose counters say the throttling (cpu.stat)
  bool v2 = false;   // cgroup v2 (cpu.max, throttled_usec); else v1 (cfs_quota_us)
};

struct CpuThrottling {
  std::int64_t periods = 0;    // CFS periods with runnable threads
  std::int64_t throttled = 0;  // of them, those the quota ran out in
  std::int64_t throttled_ns = 0;
};

// `self_cgroup`: /proc/self/cgroup's text; `mountinfo`: /proc/self/mountinfo's; `prefix`: put
// before every path read (a test's tree; "" for the real one). nullopt where no ancestor of
// the process's cgroup (its own included) sets a quota, or none can be read.
std::optional<CpuQuota> read_cpu_quota(const std::string& self_cgroup, const std::string& mountinfo,
                                       const std::string& prefix = "");

// The counters of `quota.dir`'s cpu.stat; nullopt where it cannot be read.
std::optional<CpuThrottling> read_cpu_throttling(const CpuQuota& quota,
                                                 const std::string& prefix = "");

// This process's, from /proc/self.
std::optional<CpuQuota> own_cpu_quota();

}  // namespace sonde
