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
// Pinned to one CPU, the spinning is that CPU's, and none of it the others'.
TEST(HostCpu, BusyTimeCountsThisThreadsSpinning) {
  cpu_set_t all;
  ASSERT_EQ(sched_getaffinity(0, sizeof all, &all), 0);
  int mine = -1;
  for (int c = 0; c < CPU_SETSIZE && mine < 0; ++c)
    if (CPU_ISSET(c, &all)) mine = c;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(mine, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  auto before = host_busy_cpu_s(one), before_all = host_busy_cpu_s(all);
  ASSERT_TRUE(before.has_value() && before_all.has_value());
  EXPECT_GT(*before, 0);
  EXPECT_GE(*before_all, *before);
  volatile double x = 0;
  for (double start = thread_cpu_s(); thread_cpu_s() - start < 0.3;) x = x + 1;
  auto after = host_busy_cpu_s(one), after_all = host_busy_cpu_s(all);
  sched_setaffinity(0, sizeof all, &all);
  ASSERT_TRUE(after.has_value() && after_all.has_value());
  EXPECT_GE(*after - *before, 0.25);
  EXPECT_GE(*after_all - *before_all, 0.25);
  // A mask of no CPU reads nothing.
  cpu_set_t none;
  CPU_ZERO(&none);
  EXPECT_FALSE(host_busy_cpu_s(none).has_value());
}

}  // namespace
}  // namespace sonde
