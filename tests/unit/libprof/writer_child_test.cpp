#include "store/writer_child.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

namespace sonde {
namespace {

// A process at its descriptor limit: the child opens a file where the parent cannot, and the
// parent's descriptors are all still open after.
TEST(WriterChild, TheChildHasDescriptorsWhereTheParentHasNone) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low{64, old.rlim_max};
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> held;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held.push_back(fd);
  EXPECT_EQ(errno, EMFILE);
  std::string error;
  bool ok = write_in_child(
      8, 10'000,
      [](std::string& why) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0) why = "no descriptor in the child";
        return fd >= 0;
      },
      error);
  EXPECT_TRUE(ok) << error;
  for (int fd : held) EXPECT_GE(fcntl(fd, F_GETFD), 0) << fd;  // none closed here
  for (int fd : held) close(fd);
  setrlimit(RLIMIT_NOFILE, &old);
}

TEST(WriterChild, TheChildsErrorComesBack) {
  std::string error = "opening the profile: out of descriptors";
  bool ok = write_in_child(
      8, 10'000,
      [](std::string& why) {
        why = "disk I/O error";
        return false;
      },
      error);
  EXPECT_FALSE(ok);
  EXPECT_EQ(error, "disk I/O error");
}

TEST(WriterChild, AChildThatNeverEndsIsKilledAtTheTimeout) {
  std::string error = "out of descriptors";
  auto start = std::chrono::steady_clock::now();
  bool ok = write_in_child(
      8, 300,
      [](std::string&) {
        for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
        return true;
      },
      error);
  EXPECT_FALSE(ok);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_NE(error.find("had not ended"), std::string::npos) << error;
}

}  // namespace
}  // namespace sonde
