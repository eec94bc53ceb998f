// core/huge_pages: the flush's big blocks, mapped on 2 MB boundaries, and what happens when the
// mapping is refused.
#include "core/huge_pages.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>

namespace sonde {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

bool on_2mb_boundary(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & (2 * kMiB - 1)) == 0;
}

TEST(HugePages, LargeBlocksStartOnA2MBBoundaryAndAreWritable) {
  for (size_t bytes : {kMiB, 3 * kMiB, 9 * kMiB + 123}) {
    auto* p = static_cast<unsigned char*>(huge_alloc(bytes));
    ASSERT_NE(p, nullptr);
    EXPECT_TRUE(on_2mb_boundary(p)) << bytes;
    std::memset(p, 0xab, bytes);
    EXPECT_EQ(p[bytes - 1], 0xab);
    huge_free(p, bytes);
  }
}

TEST(HugePages, AVectorWithTheAllocatorGrowsAndKeepsItsElements) {
  HugeVector<int64_t> v;
  for (int64_t i = 0; i < 600'000; ++i) v.push_back(i);  // 4.8 MB, through several blocks
  EXPECT_TRUE(on_2mb_boundary(v.data()));
  int64_t sum = 0;
  for (int64_t x : v) sum += x;
  EXPECT_EQ(sum, int64_t(600'000) * 599'999 / 2);
}

// Under an address-space limit that leaves room for the block but not for the 2 MB of slack
// the alignment takes, the block comes from malloc instead, and huge_free gives it back there.
TEST(HugePages, UnderAnAddressSpaceLimitTheBlockComesFromMalloc) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    size_t pages = 0;
    std::ifstream("/proc/self/statm") >> pages;
    size_t in_use = pages * size_t(sysconf(_SC_PAGESIZE));
    rlimit limit{in_use + 5 * kMiB, in_use + 5 * kMiB};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(10);
    size_t bytes = 3 * kMiB;  // mapped: 4 MB and 2 MB of slack, over the limit
    auto* p = static_cast<unsigned char*>(huge_alloc(bytes));
    if (p == nullptr) _exit(11);
    if (on_2mb_boundary(p)) _exit(12);
    std::memset(p, 1, bytes);
    huge_free(p, bytes);
    // And again: the freed block was malloc's to reuse, not unmapped in the middle of its heap.
    p = static_cast<unsigned char*>(huge_alloc(bytes));
    if (p == nullptr) _exit(13);
    std::memset(p, 2, bytes);
    huge_free(p, bytes);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace sonde
