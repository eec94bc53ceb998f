#include "core/host_cpu.hpp"

#include <gtest/gtest.h>
#include <time.h>

namespace sonde {
namespace {

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The host's busy CPU time counts this thread's own: 0.3 s of spinning shows in it (at least
// most of it: /proc/stat counts in clock ticks, and the kernel charges whole ones).
TEST(HostCpu, BusyTimeCountsThisThreadsSpinning) {
  auto before = host_busy_cpu_s();
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(*before, 0);
  volatile double x = 0;
  for (double start = thread_cpu_s(); thread_cpu_s() - start < 0.3;) x = x + 1;
  auto after = host_busy_cpu_s();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after - *before, 0.25);
}

}  // namespace
}  // namespace sonde
