// The cgroup CPU quota as the kernel's files state it, in trees laid out as cgroup v1 and v2
// mount them (a container's view mounts its own cgroup as the hierarchy's root); the live
// reading of this machine's own cgroup is the e2e test's (tests/e2e/test_cpu_quota.py).
#include "core/cpu_quota.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "temp_dir.hpp"

namespace sonde {
namespace {

namespace fs = std::filesystem;

void put(const test::TempDir& dir, const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(dir.file(path)).parent_path());
  dir.write(path, text);
}

constexpr char kV2Mounts[] =
    "25 1 0:22 / / rw - ext4 /dev/vda1 rw\n"
    "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(CpuQuota, V2TakesTheSmallestQuotaAlongTheAncestors) {
  test::TempDir t;
  std::string root = "/sys/fs/cgroup";
  put(t, root + "/kubepods/cpu.max", "400000 100000\n");        // 4 CPUs for the pods
  put(t, root + "/kubepods/pod1/cpu.max", "250000 100000\n");   // 2.5 for this pod
  put(t, root + "/kubepods/pod1/ctr/cpu.max", "max 100000\n");  // none of its own
  put(t, root + "/kubepods/pod1/ctr/cpu.stat",
      "usage_usec 9000\nnr_periods 120\nnr_throttled 30\nthrottled_usec 450000\n");
  auto q = read_cpu_quota("0::/kubepods/pod1/ctr\n", kV2Mounts, t.file(""));
  ASSERT_TRUE(q.has_value());
  EXPECT_DOUBLE_EQ(q->cores, 2.5);
  EXPECT_TRUE(q->v2);
  EXPECT_EQ(q->dir, root + "/kubepods/pod1");
  // The throttling counters of the cgroup whose quota binds.
  put(t, root + "/kubepods/pod1/cpu.stat",
      "usage_usec 9000\nnr_periods 200\nnr_throttled 50\nthrottled_usec 1500000\n");
  auto th = read_cpu_throttling(*q, t.file(""));
  ASSERT_TRUE(th.has_value());
  EXPECT_EQ(th->periods, 200);
  EXPECT_EQ(th->throttled, 50);
  EXPECT_EQ(th->throttled_ns, 1'500'000'000);
}

TEST(CpuQuota, NoneWhereNoAncestorSetsOne) {
  test::TempDir t;
  put(t, "/sys/fs/cgroup/user.slice/cpu.max", "max 100000\n");
  EXPECT_FALSE(read_cpu_quota("0::/user.slice\n", kV2Mounts, t.file("")).has_value());
  EXPECT_FALSE(read_cpu_quota("", kV2Mounts, t.file("")).has_value());
  EXPECT_FALSE(read_cpu_quota("0::/user.slice\n", "", t.file("")).has_value());  // not mounted
}

TEST(CpuQuota, AContainersViewOfItsOwnCgroup) {
  // Docker with a cgroup namespace: /proc/self/cgroup says "/", the mount's root is "/", and
  // the container's limit is in the files at the mount point.
  test::TempDir t;
  put(t, "/sys/fs/cgroup/cpu.max", "150000 100000\n");
  auto q = read_cpu_quota("0::/\n", kV2Mounts, t.file(""));
  ASSERT_TRUE(q.has_value());
  EXPECT_DOUBLE_EQ(q->cores, 1.5);
  EXPECT_EQ(q->dir, "/sys/fs/cgroup");
}

TEST(CpuQuota, V1CpuControllerOnAHybridHost) {
  // The v1 cpu controller, where mounted, is the one that applies; v1 mounts may show a
  // cgroup below the hierarchy's root (a container without a cgroup namespace: its root is
  // /docker/abc, the process's path the same).
  constexpr char kMounts[] =
      "25 1 0:22 / / rw - ext4 /dev/vda1 rw\n"
      "35 30 0:30 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "36 30 0:31 / /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
      "37 30 0:32 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";
  test::TempDir t;
  put(t, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "50000\n");
  put(t, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  put(t, "/sys/fs/cgroup/cpu,cpuacct/cpu.stat",
      "nr_periods 10\nnr_throttled 4\nthrottled_time 123456789\n");
  auto q = read_cpu_quota("12:cpuset:/docker/abc\n4:cpu,cpuacct:/docker/abc\n0::/docker/abc\n",
                          kMounts, t.file(""));
  ASSERT_TRUE(q.has_value());
  EXPECT_DOUBLE_EQ(q->cores, 0.5);
  EXPECT_FALSE(q->v2);
  auto th = read_cpu_throttling(*q, t.file(""));
  ASSERT_TRUE(th.has_value());
  EXPECT_EQ(th->throttled, 4);
  EXPECT_EQ(th->throttled_ns, 123456789);
  // -1: no quota (v1's "max").
  put(t, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  EXPECT_FALSE(read_cpu_quota("4:cpu,cpuacct:/docker/abc\n", kMounts, t.file("")).has_value());
}

}  // namespace
}  // namespace sonde
